package redislock

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/golocker/locker/backend"
)

// Waiting. A waiter joins the lock's queue in Redis (scripts/queue.lua)
// and the lock comes to it: the release, expiry or forced release that
// frees the lock hands it to the oldest live waiter in the same script,
// which publishes "<token> <owner>" on that waiter's Driver's inbox
// (pubsub.go). The listener passes the grant to that waiter, which returns
// without another call: one release costs one script and one message,
// however many wait, in however many processes, and waiters are served in
// the order they joined (Capabilities.FIFO).
//
// A waiter joins once the inbox is subscribed (Redisson's order: listen,
// then ask), so no grant to it is published before its process listens.
// Pub/sub is at-most-once (a reconnect loses messages), so a waiter also
// renews its place at least every refreshInterval and at the end of the
// holder's lease: that call finds the lock handed to it if the message was
// lost, and frees an expired lock, handing it to the oldest waiter. A place
// that is not renewed lapses after placeWindow (a crashed waiter is
// skipped), and a waiter that renews late joins again at the back.
//
// A waiter that gives up (ctx, Close, an error) leaves the queue with
// queue_release.lua, which also passes the lock on if it was handed to
// the waiter meanwhile. A waiter whose inbox is not subscribed (SUBSCRIBE
// failed or is not confirmed) joins without one and polls with backoff.

type waiter struct {
	owner string
	name  string
	ttl   time.Duration
	grant chan grant    // capacity 1: the grant published to this owner
	pass  chan *lease   // capacity 1: the lock passed by a hold of this Driver (pass.go)
	wake  chan struct{} // capacity 1: the lock was freed with nobody queued, or pub/sub reconnected
	mine  bool          // only this Driver's waiters are ahead in the queue in Redis (d.mu)
}

// grant is a hand-off published to a waiter: its token, and the last token
// reserved with it (0: none).
type grant struct{ token, last uint64 }

func (w *waiter) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Polling backoff of a waiter without a subscription, and the smallest wait.
const (
	pollMin = 5 * time.Millisecond
	minWait = time.Millisecond
)

// refreshInterval is how often a waiter renews its place: a third of the
// lease it asks for, so that a grant found by a renewal (its message was
// lost) is dated at most that much early, within [10ms, maxWait].
func refreshInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/3, 10*time.Millisecond), maxWait)
}

// placeWindow is how long a place in the queue lasts unless renewed:
// three renewals and a second of slack for a slow process. A waiter that
// crashed is skipped after it; one handed the lock in that time holds it
// until its lease ends, like a holder that crashed.
func placeWindow(ttl time.Duration) time.Duration {
	return 3*refreshInterval(ttl) + time.Second
}

// wait acquires r.Name for r.Owner, waiting until granted or ctx ends.
func (d *Driver) wait(ctx context.Context, r backend.Request) (backend.Lease, error) {
	d.mu.Lock()
	subscribed := d.inbox != nil && d.inbox.isReady()
	d.mu.Unlock()
	if !subscribed {
		// One try first, without subscribing or queueing: a free lock
		// costs one call. (With the inbox subscribed, joining the queue
		// also takes a free lock at once.)
		t, err := d.try(ctx, r, false, "")
		switch {
		case t.l != nil:
			return t.l, nil
		case err != nil && !retryable(err):
			return nil, err
		}
	}

	w, b, err := d.join(r)
	if err != nil {
		return nil, err
	}
	if !b.isReady() && !b.late.Load() {
		// If the SUBSCRIBE is not confirmed in time, the waiter joins
		// without the inbox and polls, and so do the next ones until it
		// is.
		if err := d.awaitReady(ctx, b); err != nil {
			return nil, d.giveUp(ctx, w, r, err)
		}
	}
	key := d.keys.lock(r.Name)
	refresh := refreshInterval(r.TTL)
	backoff := pollMin    // polling without the inbox
	errBackoff := pollMin // retrying after transient errors
	// since is the send time of the last call that left the owner
	// waiting (or, before one did, of the first call that may have queued
	// it): a grant found later happened after it, so a lease dated from it
	// is never dated late.
	var since time.Time
	for {
		ready := b.isReady()
		inbox := ""
		if ready {
			inbox = d.inboxName
		}
		sent := time.Now()
		if since.IsZero() {
			since = sent
		}
		t, err := d.try(ctx, r, true, inbox)
		if l := t.l; l != nil {
			if t.already {
				l.granted(l.token, l.last, since)
			}
			return d.granted(ctx, w, r, l, t.already)
		}
		left := t.left
		if err != nil {
			if ctx.Err() != nil || d.isClosed() || !retryable(err) {
				return nil, d.giveUp(ctx, w, r, err)
			}
			left = errBackoff
			errBackoff = min(2*errBackoff, maxWait)
		} else {
			errBackoff = pollMin
			since = sent
			d.setMine(w, t.mine)
		}

		bound := min(left, refresh)
		if !ready {
			bound = min(bound, backoff/2+rand.N(backoff/2+1))
			backoff = min(2*backoff, maxWait)
		} else {
			backoff = pollMin
		}
		timer := time.NewTimer(max(bound, minWait))
		select {
		case g := <-w.grant:
			timer.Stop()
			l := d.newLease(r, key)
			l.granted(g.token, g.last, since)
			return d.granted(ctx, w, r, l, true)
		case l := <-w.pass:
			timer.Stop()
			return d.granted(ctx, w, r, l, true)
		case <-w.wake:
		case <-timer.C:
		case <-ctx.Done():
			err = ctx.Err()
		case <-d.closed:
			err = backend.ErrClosed
		}
		timer.Stop()
		if err != nil {
			return nil, d.giveUp(ctx, w, r, err)
		}
	}
}

// granted ends a wait that got the lock. A grant made by another call (a
// hand-off) is confirmed on the replicas first if WithWaitReplicas asks
// for it.
func (d *Driver) granted(ctx context.Context, w *waiter, r backend.Request, l *lease, handed bool) (backend.Lease, error) {
	if handed && d.opts.waitReplicas > 0 {
		if err := d.confirmReplicated(ctx, l, r.TTL); err != nil {
			return nil, d.giveUp(ctx, w, r, err)
		}
	}
	d.leave(w)
	return l, nil
}

// join registers a waiter for r, subscribing the Driver's inbox if it is
// not yet.
func (d *Driver) join(r backend.Request) (*waiter, *inbox, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.isClosed() {
		return nil, nil, backend.ErrClosed
	}
	w := &waiter{
		owner: r.Owner,
		name:  r.Name,
		ttl:   r.TTL,
		grant: make(chan grant, 1),
		pass:  make(chan *lease, 1),
		wake:  make(chan struct{}, 1),
	}
	d.waiters[w.owner] = w
	d.queues[w.name] = append(d.queues[w.name], w)
	d.waiting.Add(1)
	return w, d.startInboxLocked(), nil
}

// unregister stops grants and passes from reaching w.
func (d *Driver) unregister(w *waiter) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unregisterLocked(w)
}

func (d *Driver) unregisterLocked(w *waiter) {
	if d.waiters[w.owner] == w {
		delete(d.waiters, w.owner)
	}
	q := d.queues[w.name]
	if i := slices.Index(q, w); i >= 0 {
		q = slices.Delete(q, i, i+1)
		if len(q) == 0 {
			delete(d.queues, w.name)
		} else {
			d.queues[w.name] = q
		}
	}
}

// setMine records whether only this Driver's waiters are ahead of w in
// the queue in Redis.
func (d *Driver) setMine(w *waiter, mine bool) {
	d.mu.Lock()
	w.mine = mine
	d.mu.Unlock()
}

// leave ends w's wait.
func (d *Driver) leave(w *waiter) {
	d.unregister(w)
	d.waiting.Done()
}

// giveUp ends a wait that failed with err: it stops grants from reaching
// the waiter, and then takes the owner out of the queue in Redis, passing
// the lock on if it was handed to the owner meanwhile, so that nothing is
// held once Acquire returns (with a ctx of its own: the caller's may have
// ended). It returns err, or ctx's error when ctx ended.
func (d *Driver) giveUp(ctx context.Context, w *waiter, r backend.Request, err error) error {
	d.unregister(w)
	defer d.waiting.Done()
	select {
	case l := <-w.pass:
		// Passed the lock as it gave up: it passes it on, or frees it,
		// once Redis has it as the holder.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		_ = l.Release(cctx)
		cancel()
	default:
	}
	d.cleanup(ctx, &lease{d: d, key: d.keys.lock(r.Name), owner: r.Owner})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// awaitReady waits for the inbox's SUBSCRIBE to be confirmed, at most
// maxWait.
func (d *Driver) awaitReady(ctx context.Context, b *inbox) error {
	t := time.NewTimer(maxWait)
	defer t.Stop()
	select {
	case <-b.ready:
	case <-t.C:
		b.late.Store(true)
	case <-ctx.Done():
		return ctx.Err()
	case <-d.closed:
		return backend.ErrClosed
	}
	return nil
}
