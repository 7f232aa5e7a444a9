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
//
// A waiter of a Driver that holds the lock may instead wait in the
// process only, and a hold of the Driver passes the lock to its next
// waiter without freeing it: pass.go.

type waiter struct {
	owner  string
	name   string
	ttl    time.Duration
	grant  chan grant     // capacity 1: the grant published to this owner
	pass   chan *lease    // capacity 1: the lock passed by a hold of this Driver (pass.go)
	placed chan placement // capacity 1: a local waiter was queued in Redis, or must queue
	wake   chan struct{}  // capacity 1: the lock was freed with nobody queued, or pub/sub reconnected

	// Guarded by the Driver's mu.
	local   bool          // waits in the process only, with no place in Redis (pass.go)
	placing chan struct{} // closed when the release that queues a local waiter in Redis returned
	mine    bool          // may be passed the lock: local, or only this Driver's waiters are ahead of it in Redis
	called  bool          // its place in Redis exists: a call or release that made it returned (WithBatch may pass it the lock)
	calling int           // calls of its own on their way (pass.go: a stray)
}

// placement tells a local waiter that a release queued it in Redis (ok,
// with the time that release was sent), or that it must queue itself.
type placement struct {
	ok   bool
	sent time.Time
}

func (w *waiter) queued(p placement) {
	select {
	case w.placed <- p:
	default:
	}
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
			d.startChain(t.l, t.last, false)
			return t.l, nil
		case err != nil && !retryable(err):
			return nil, err
		}
	}

	w, b, err := d.join(r)
	if err != nil {
		return nil, err
	}
	joined := time.Now()
	key := d.keys.lock(r.Name)
	// skip is whether the loop's first call can wait a refresh: the
	// waiter already has a place in Redis.
	skip := false
	d.mu.Lock()
	local := w.local
	d.mu.Unlock()
	if local {
		l, p, err := d.waitLocally(ctx, w)
		switch {
		case err != nil:
			return nil, d.giveUp(ctx, w, r, err)
		case l != nil:
			return d.granted(ctx, w, r, l, true, 0, false)
		}
		skip = p.ok
		if skip {
			joined = p.sent // a grant to it happens after
		}
	}
	if !b.isReady() && !b.late.Load() {
		// If the SUBSCRIBE is not confirmed in time, the waiter joins
		// without the inbox and polls, and so do the next ones until it
		// is.
		if err := d.awaitReady(ctx, b); err != nil {
			return nil, d.giveUp(ctx, w, r, err)
		}
	}
	refresh := refreshInterval(r.TTL)
	backoff := pollMin    // polling without the inbox
	errBackoff := pollMin // retrying after transient errors
	// since is the send time of the last call that left the owner
	// waiting (or, before one did, of the first call that may have queued
	// it, or the waiter's arrival when a release queued it): a grant found
	// later happened after it, so a lease dated from it is never dated
	// late.
	since := joined
	for {
		ready := b.isReady()
		inbox := ""
		if ready {
			inbox = d.inboxName
		}
		left := refresh
		if !skip {
			sent := time.Now()
			d.calling(w, 1)
			t, err := d.try(ctx, r, true, inbox)
			d.calling(w, -1)
			if l := t.l; l != nil {
				if t.already {
					l.start = since
				}
				return d.granted(ctx, w, r, l, t.already, t.last, inbox != "")
			}
			left = t.left
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
		}
		skip = false

		bound := min(left, refresh)
		if !ready {
			bound = min(bound, backoff/2+rand.N(backoff/2+1))
			backoff = min(2*backoff, maxWait)
		} else {
			backoff = pollMin
		}
		timer := time.NewTimer(max(bound, minWait))
		var err error
		select {
		case g := <-w.grant:
			timer.Stop()
			l := d.newLease(r, key)
			l.token, l.start = g.token, since
			return d.granted(ctx, w, r, l, true, g.last, true)
		case l := <-w.pass:
			timer.Stop()
			return d.granted(ctx, w, r, l, true, 0, false)
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

// waitLocally waits as a local waiter (pass.go): until the lock is passed
// to w (l), or w is queued in Redis (p.ok: by the release that ended the
// chain; or not, when that release failed or the chain was found gone, and
// w must call Redis at once).
func (d *Driver) waitLocally(ctx context.Context, w *waiter) (l *lease, p placement, err error) {
	t := time.NewTicker(refreshInterval(w.ttl))
	defer t.Stop()
	for {
		select {
		case l := <-w.pass:
			return l, placement{}, nil
		case p := <-w.placed:
			return nil, p, nil
		case <-t.C:
			if !d.chainAlive(w.name) && d.stopWaitingLocally(w) {
				return nil, placement{}, nil
			}
		case <-ctx.Done():
			return nil, placement{}, ctx.Err()
		case <-d.closed:
			return nil, placement{}, backend.ErrClosed
		}
	}
}

// stopWaitingLocally makes w a waiter that queues in Redis, unless a
// release just did (its placed signal is on its way); it reports whether
// it did.
func (d *Driver) stopWaitingLocally(w *waiter) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !w.local {
		return false
	}
	w.local, w.mine = false, false
	return true
}

// granted ends a wait that got the lock. A grant made by another call (a
// hand-off) is confirmed on the replicas first if WithWaitReplicas asks
// for it. A grant from Redis starts a chain (pass.go), with the last token
// reserved with it; listen tells whether it carried the Driver's inbox. A
// lease passed by a hold of the Driver is in its chain already.
func (d *Driver) granted(ctx context.Context, w *waiter, r backend.Request, l *lease, handed bool, last uint64, listen bool) (backend.Lease, error) {
	if handed && d.opts.waitReplicas > 0 {
		if err := d.confirmReplicated(ctx, l, r.TTL); err != nil {
			return nil, d.giveUp(ctx, w, r, err)
		}
	}
	if l.c == nil {
		d.startChain(l, last, listen)
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
		owner:  r.Owner,
		name:   r.Name,
		ttl:    r.TTL,
		grant:  make(chan grant, 1),
		pass:   make(chan *lease, 1),
		placed: make(chan placement, 1),
		wake:   make(chan struct{}, 1),
	}
	if d.mayWaitLocallyLocked(r) {
		w.local, w.mine = true, true
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
	w.mine, w.called = mine, true
	d.mu.Unlock()
}

// calling counts w's calls on their way: n = 1 as one starts, -1 as it
// returns.
func (d *Driver) calling(w *waiter, n int) {
	d.mu.Lock()
	w.calling += n
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
	d.mu.Lock()
	d.unregisterLocked(w)
	placing := w.placing
	d.mu.Unlock()
	defer d.waiting.Done()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	select {
	case l := <-w.pass:
		// Passed the lock as it gave up: it passes it on, or frees it.
		_ = l.Release(cctx)
	default:
	}
	if placing != nil {
		// A release is queueing it in Redis (pass.go), and may hand it
		// the lock: leave after that.
		select {
		case <-placing:
		case <-cctx.Done():
		}
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
