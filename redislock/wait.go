package redislock

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/golocker/locker/backend"
)

// Waiting. A waiter joins the lock's queue in Redis (scripts/queue.lua)
// and the lock comes to it: the release, expiry or forced release that
// frees the lock hands it to the oldest live waiter in the same script,
// which publishes "granted <token> <owner>" on the lock's channel. The
// Driver's pub/sub listener passes the grant to that waiter alone, which
// returns without another call: one release costs one script and one
// message, however many wait, in however many processes, and waiters are
// served in the order they joined (Capabilities.FIFO).
//
// A waiter subscribes before it joins (Redisson's order), so no grant is
// published before its process listens. Pub/sub is at-most-once (a
// reconnect loses messages), so a waiter also renews its place at least
// every refreshInterval and at the end of the holder's lease: that call
// finds the lock handed to it if the message was lost, and frees an
// expired lock, handing it to the oldest waiter. A place that is not
// renewed lapses after placeWindow (a crashed waiter is skipped), and the
// waiter joins again at the back when it renews late.
//
// A waiter that gives up (ctx, Close, an error) leaves the queue with
// queue_release.lua, which also passes the lock on if it was handed to
// the waiter meanwhile. A waiter without a subscription (the Driver's
// bound was reached, or SUBSCRIBE failed) polls with backoff instead of
// waiting for the message.

// queue is this Driver's waiters on one name. Guarded by Driver.mu.
type queue struct {
	name, key, channel string
	waiters            map[string]*waiter // by owner
	sub                *subscription
}

type waiter struct {
	owner string
	grant chan uint64   // capacity 1: the token of the grant published to this owner
	wake  chan struct{} // capacity 1: the lock was freed with nobody queued, or pub/sub reconnected
}

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
	q := d.queues[r.Name]
	subscribed := q != nil && q.sub != nil && q.sub.isReady()
	d.mu.Unlock()
	if !subscribed {
		// One try first, without subscribing or queueing: a free lock
		// costs one call. (With a subscription, joining the queue also
		// takes a free lock at once.)
		l, _, _, err := d.try(ctx, r, false)
		switch {
		case l != nil:
			return l, nil
		case err != nil && !retryable(err):
			return nil, err
		}
	}

	q, w, err := d.join(r.Name, r.Owner)
	if err != nil {
		return nil, err
	}
	refresh := refreshInterval(r.TTL)
	backoff := pollMin    // polling without a subscription
	errBackoff := pollMin // retrying after transient errors
	var awaited *subscription
	// since is the send time of the last call that left the owner
	// waiting (or, before one did, of the first call that may have queued
	// it): a grant found later happened after it, so a lease dated from it
	// is never dated late.
	var since time.Time
	for {
		d.mu.Lock()
		sub := q.sub
		d.mu.Unlock()
		if sub != nil && sub != awaited && !sub.isReady() {
			// Once per subscription: if it is never confirmed (no
			// pub/sub for this client), the waiter polls instead.
			awaited = sub
			if err := d.awaitReady(ctx, sub); err != nil {
				return nil, d.giveUp(ctx, q, w, r, err)
			}
		}

		sent := time.Now()
		if since.IsZero() {
			since = sent
		}
		l, already, left, err := d.try(ctx, r, true)
		if l != nil {
			if already {
				l.start = since
			}
			return d.granted(ctx, q, w, r, l, already)
		}
		if err != nil {
			if ctx.Err() != nil || d.isClosed() || !retryable(err) {
				return nil, d.giveUp(ctx, q, w, r, err)
			}
			left = errBackoff
			errBackoff = min(2*errBackoff, maxWait)
		} else {
			errBackoff = pollMin
			since = sent
		}

		bound := min(left, refresh)
		if sub == nil || !sub.isReady() {
			bound = min(bound, backoff/2+rand.N(backoff/2+1))
			backoff = min(2*backoff, maxWait)
		} else {
			backoff = pollMin
		}
		timer := time.NewTimer(max(bound, minWait))
		select {
		case token := <-w.grant:
			timer.Stop()
			l := &lease{d: d, key: q.key, owner: r.Owner, token: token, start: since}
			return d.granted(ctx, q, w, r, l, true)
		case <-w.wake:
		case <-timer.C:
		case <-ctx.Done():
			err = ctx.Err()
		case <-d.closed:
			err = backend.ErrClosed
		}
		timer.Stop()
		if err != nil {
			return nil, d.giveUp(ctx, q, w, r, err)
		}
	}
}

// granted ends a wait that got the lock. A grant made by another call (a
// hand-off) is confirmed on the replicas first if WithWaitReplicas asks
// for it.
func (d *Driver) granted(ctx context.Context, q *queue, w *waiter, r backend.Request, l *lease, handed bool) (backend.Lease, error) {
	if handed && d.opts.waitReplicas > 0 {
		if err := d.confirmReplicated(ctx, l, r.TTL); err != nil {
			return nil, d.giveUp(ctx, q, w, r, err)
		}
	}
	d.leave(q, w)
	return l, nil
}

// join adds a waiter for owner to name's queue, subscribing the queue to
// the lock's channel if it is not yet.
func (d *Driver) join(name, owner string) (*queue, *waiter, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.isClosed() {
		return nil, nil, backend.ErrClosed
	}
	q := d.queues[name]
	if q == nil {
		key := d.keys.lock(name)
		q = &queue{name: name, key: key, channel: channelOf(key), waiters: make(map[string]*waiter)}
		d.queues[name] = q
	}
	w := &waiter{owner: owner, grant: make(chan uint64, 1), wake: make(chan struct{}, 1)}
	q.waiters[owner] = w
	d.subscribeLocked(q) // a no-op when subscribed or at the bound
	d.waiting.Add(1)
	return q, w, nil
}

// leave takes w out of its queue. The last waiter out drops the queue and
// its subscription.
func (d *Driver) leave(q *queue, w *waiter) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if q.waiters[w.owner] == w {
		delete(q.waiters, w.owner)
	}
	if len(q.waiters) == 0 {
		if d.queues[q.name] == q {
			delete(d.queues, q.name)
		}
		d.unsubscribeLocked(q)
	}
	d.waiting.Done()
}

// giveUp ends a wait that failed with err: it leaves the local queue, so a
// grant published from now on is not taken, and then the queue in Redis,
// passing the lock on if it was handed to the owner meanwhile. The call to
// Redis runs in the background (Close waits for it), so a cancelled Lock
// returns at once. It returns err, or ctx's error when ctx ended.
func (d *Driver) giveUp(ctx context.Context, q *queue, w *waiter, r backend.Request, err error) error {
	d.mu.Lock()
	if q.waiters[w.owner] == w {
		delete(q.waiters, w.owner)
	}
	d.mu.Unlock()
	l := &lease{d: d, key: q.key, owner: r.Owner}
	go func() {
		defer d.leave(q, w) // after the call: Close waits for it
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_, _ = l.release(cctx, true)
	}()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// awaitReady waits for sub's SUBSCRIBE to be confirmed, at most maxWait:
// if the confirmation is late, the waiter joins anyway and polls.
func (d *Driver) awaitReady(ctx context.Context, sub *subscription) error {
	t := time.NewTimer(maxWait)
	defer t.Stop()
	select {
	case <-sub.ready:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	case <-d.closed:
		return backend.ErrClosed
	}
	return nil
}

// onMessage passes a message on name's channel to the waiters: a grant to
// the waiter it names, if it waits here; "released" (the lock was freed
// with nobody queued in Redis) to every waiter here, which are about to
// join.
func (d *Driver) onMessage(channel, payload string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.subs[channel]
	if s == nil {
		return
	}
	q := d.queues[s.name]
	if q == nil {
		return
	}
	if rest, ok := strings.CutPrefix(payload, "granted "); ok {
		tok, owner, _ := strings.Cut(rest, " ")
		token, err := strconv.ParseUint(tok, 10, 64)
		if w := q.waiters[owner]; w != nil && err == nil {
			select {
			case w.grant <- token:
			default:
			}
		}
		return
	}
	d.wakeAllLocked(s.name)
}

// wakeAllLocked makes every waiter on name call Redis now. d.mu is held.
func (d *Driver) wakeAllLocked(name string) {
	if q := d.queues[name]; q != nil {
		for _, w := range q.waiters {
			w.poke()
		}
	}
}
