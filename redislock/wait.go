package redislock

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/redislock/internal/inbox"
)

// Waiting (backend.Waiter). A waiter joins the lock's queue in Redis
// (queue.lua in package scripts) and the lock comes to it: the release,
// expiry or forced release that frees the lock hands it to the oldest live
// waiter in the same script, which publishes "<token> <owner>" on that
// waiter's Driver's inbox (package inbox). The listener passes the grant to the waiter,
// which returns without another call: one release costs one script and one
// message, however many wait, in however many processes, and waiters are
// served in the order they joined (Capabilities.FIFO). Package locker
// sends only one waiter of a Client per name here; its others wait in the
// Client, and a hold of the Client passes the lock to them (package chain).
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
// A grant's message can reach a waiter long after it was sent: its process
// or its connection stalled. By then the grant has lapsed, and the
// waiter's next call has put it back in the queue under the same owner, so
// the message must not be taken for a grant of now. Every call that leaves
// the waiter queued returns the name's fence counter; a grant made before
// that call carries a token not above it, and is ignored: else a paused
// waiter could return from Lock with the token of a grant that had lapsed,
// below the tokens of the owners who held the lock since.
//
// A waiter that gives up (ctx, Close, an error) leaves the queue with
// queue_release.lua, which also passes the lock on if it was handed to
// the waiter meanwhile. A waiter whose inbox is not subscribed (SUBSCRIBE
// failed or is not confirmed) joins without one and polls with backoff.

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

// AcquireWait implements backend.Waiter.
func (d *Driver) AcquireWait(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if err := d.check(ctx, r); err != nil {
		return nil, err
	}
	if !d.inbox.Ready() {
		// One try first, without subscribing or queueing: a free lock
		// costs one call, and a Driver that never waits never subscribes.
		// (With the inbox subscribed, joining the queue also takes a free
		// lock at once.)
		t, err := d.try(ctx, r, false, "")
		switch {
		case t.l != nil:
			d.startChain(r.Name, t.l, t.last, false)
			return d.hold(t.l), nil
		case err != nil && !retryable(err):
			return nil, err
		}
	}
	if !d.start(&d.waiting) {
		return nil, backend.ErrClosed
	}
	defer d.waiting.Done()
	w := d.inbox.Join(r.Owner)
	defer d.inbox.Leave(w)
	// If the SUBSCRIBE is not confirmed in time, the waiter joins without
	// the inbox and polls, and so do the next ones until it is.
	if err := d.inbox.AwaitReady(ctx, maxWait, d.closed); err != nil {
		return nil, d.giveUp(ctx, r, err)
	}
	key := d.keys.Lock(r.Name)
	refresh := refreshInterval(r.TTL)
	backoff := pollMin    // polling without the inbox
	errBackoff := pollMin // retrying after transient errors
	// since is the send time of the last call that left the owner
	// waiting (before one did, of the first call): a grant found later
	// happened after it, so a lease dated from it is never dated late.
	// fence is the fence counter that call returned: a grant with a token
	// not above it was made before that call, and has lapsed.
	since := time.Now()
	var fence uint64
	for {
		ready := d.inbox.Ready()
		channel := ""
		if ready {
			channel = d.inbox.Channel()
		}
		sent := time.Now()
		t, err := d.try(ctx, r, true, channel)
		if l := t.l; l != nil {
			return d.granted(ctx, r, l, t.already, t.last, channel != "")
		}
		left := t.left
		if err != nil {
			if ctx.Err() != nil || d.isClosed() || !retryable(err) {
				return nil, d.giveUp(ctx, r, err)
			}
			left = errBackoff
			errBackoff = min(2*errBackoff, maxWait)
		} else {
			errBackoff = pollMin
			since, fence = sent, t.fence
		}
		bound := min(left, refresh)
		if !ready {
			bound = min(bound, backoff/2+rand.N(backoff/2+1))
			backoff = min(2*backoff, maxWait)
		} else {
			backoff = pollMin
		}
		g, err := d.await(ctx, w, max(bound, minWait), fence, since.Add(r.TTL/2))
		if err != nil {
			return nil, d.giveUp(ctx, r, err)
		}
		if g != nil {
			l := d.newLease(r, key)
			l.token, l.start = g.Token, since
			return d.granted(ctx, r, l, true, g.Last, true)
		}
	}
}

// await waits up to bound for a grant to w newer than fence, a wake-up, or
// the end of the wait. It returns the grant, or nil when it is time to call
// Redis again: also for a grant that arrives after trustUntil, which may
// have waited so long (a stalled process) that its lease ran out — the
// call then finds it held (with its exact lease) or lapsed.
func (d *Driver) await(ctx context.Context, w *inbox.Waiter, bound time.Duration, fence uint64, trustUntil time.Time) (*inbox.Grant, error) {
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for {
		select {
		case g := <-w.Grants():
			if g.Token <= fence {
				// A grant from before the last call, which found the
				// owner waiting: it lapsed (the message came late).
				continue
			}
			if time.Now().After(trustUntil) {
				return nil, nil
			}
			return &g, nil
		case <-w.Wakes():
			return nil, nil
		case <-timer.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-d.closed:
			return nil, backend.ErrClosed
		}
	}
}

// granted ends a wait that got the lock. A grant made by another call (a
// hand-off) is confirmed on the replicas first if WithWaitReplicas asks
// for it. It starts the lease's chain, with the last token reserved with
// the grant; listen tells whether the grant carried the Driver's inbox.
func (d *Driver) granted(ctx context.Context, r backend.Request, l *lease, handed bool, last uint64, listen bool) (backend.Lease, error) {
	if handed && d.opts.WaitReplicas > 0 {
		if err := d.confirmReplicated(ctx, l, r.TTL); err != nil {
			return nil, d.giveUp(ctx, r, err)
		}
	}
	d.startChain(r.Name, l, last, listen)
	return d.hold(l), nil
}

// giveUp ends a wait that failed with err: it takes the owner out of the
// queue in Redis, passing the lock on if it was handed to the owner
// meanwhile, so that nothing is held once AcquireWait returns (with a ctx
// of its own: the caller's may have ended). It returns err, or ctx's error
// when ctx ended.
func (d *Driver) giveUp(ctx context.Context, r backend.Request, err error) error {
	d.cleanup(ctx, &lease{d: d, key: d.keys.Lock(r.Name), owner: r.Owner})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
