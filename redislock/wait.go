package redislock

import (
	"container/list"
	"context"
	"math/rand/v2"
	"time"

	"github.com/golocker/locker/backend"
)

// Waiting. Within one Driver, the waiters on a name form a FIFO queue and
// only its head asks Redis: a release (a message on the lock's channel)
// wakes the head alone, so one release costs one try however many wait
// here. When the head acquires, the next head does not try at once — the
// lock was just taken — but waits for the next message. A head that gives
// up passes an unused wake-up on. Waiters in other processes compete with
// the head; the order across processes is not fair (Capabilities.FIFO is
// false).
//
// The head subscribes before the try that follows a failed one (Redisson's
// order), so a release between the two is not missed, and never waits
// longer than min(the holder's remaining lease, maxWait) before trying
// again: pub/sub is at-most-once. A queue without a subscription (the
// Driver's bound was reached, or Redis refused the SUBSCRIBE) polls with
// backoff under the same bound.

// queue is the local waiters on one name. Guarded by Driver.mu.
type queue struct {
	name, key, channel string
	waiters            list.List // of *waiter; the front is the head
	sub                *subscription
	// until is when the current holder's lease ends, as last seen: no
	// head waits past it.
	until time.Time
}

type waiter struct {
	elem   *list.Element
	signal chan struct{} // capacity 1: woken, or made head
	woken  bool          // a release was published since the head's last try
}

func (q *queue) head() *waiter {
	if f := q.waiters.Front(); f != nil {
		return f.Value.(*waiter)
	}
	return nil
}

func (w *waiter) poke() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// wakeHeadLocked tells the head of name's queue that the lock may be free.
// d.mu is held.
func (d *Driver) wakeHeadLocked(name string) {
	if q := d.queues[name]; q != nil {
		if h := q.head(); h != nil {
			h.woken = true
			h.poke()
		}
	}
}

// Polling backoff of a queue without a subscription, and the smallest wait.
const (
	pollMin = 5 * time.Millisecond
	minWait = time.Millisecond
)

// wait acquires r.Name for r.Owner, waiting until granted or ctx ends.
func (d *Driver) wait(ctx context.Context, r backend.Request) (backend.Lease, error) {
	// Nobody waits here: one try first, without subscribing.
	d.mu.Lock()
	queued := d.queues[r.Name] != nil
	d.mu.Unlock()
	var holderLeft time.Duration
	if !queued {
		l, left, err := d.try(ctx, r)
		switch {
		case l != nil:
			return l, nil
		case err != nil && !retryable(err):
			return nil, err
		case err != nil:
			left = pollMin
		}
		holderLeft = left
	}

	w := &waiter{signal: make(chan struct{}, 1)}
	d.mu.Lock()
	if d.isClosed() {
		d.mu.Unlock()
		return nil, backend.ErrClosed
	}
	q := d.queues[r.Name]
	if q == nil {
		key := d.keys.lock(r.Name)
		q = &queue{name: r.Name, key: key, channel: channelOf(key), until: time.Now().Add(holderLeft)}
		d.queues[r.Name] = q
	}
	w.elem = q.waiters.PushBack(w)
	// The first head retries once subscribed; a waiter that joined a queue
	// waits for its turn.
	tryNow := q.head() == w
	d.mu.Unlock()

	backoff := pollMin    // polling without a subscription
	errBackoff := pollMin // retrying after transient errors
	var awaited *subscription
	for {
		d.mu.Lock()
		head := q.head() == w
		if head {
			d.subscribeLocked(q) // a no-op when subscribed or at the bound
			if w.woken {
				tryNow = true
			}
			if tryNow {
				w.woken = false // a message during the try sets it again
			}
		}
		sub, until := q.sub, q.until
		d.mu.Unlock()

		if head && tryNow {
			tryNow = false
			if sub != nil && sub != awaited && !sub.isReady() {
				// Once per subscription: if it is never confirmed (no
				// pub/sub for this client), the head polls instead.
				awaited = sub
				if err := d.awaitReady(ctx, sub); err != nil {
					d.leave(q, w, time.Time{}, false)
					return nil, err
				}
			}
			l, left, err := d.try(ctx, r)
			if l != nil {
				d.leave(q, w, l.start.Add(r.TTL), false)
				return l, nil
			}
			if err != nil {
				if ctx.Err() != nil || d.isClosed() || !retryable(err) {
					// The try may have used up a wake-up: pass one on.
					d.leave(q, w, time.Time{}, true)
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					return nil, err
				}
				left = errBackoff
				errBackoff = min(2*errBackoff, maxWait)
			} else {
				errBackoff = pollMin
			}
			d.mu.Lock()
			q.until = time.Now().Add(left)
			d.mu.Unlock()
			continue
		}

		var timeout <-chan time.Time
		var timer *time.Timer
		if head {
			bound := min(time.Until(until), maxWait)
			if sub == nil || !sub.isReady() {
				bound = min(bound, backoff/2+rand.N(backoff/2+1))
				backoff = min(2*backoff, maxWait)
			} else {
				backoff = pollMin
			}
			timer = time.NewTimer(max(bound, minWait))
			timeout = timer.C
		}
		var err error
		select {
		case <-w.signal:
		case <-timeout:
			tryNow = true
		case <-ctx.Done():
			err = ctx.Err()
		case <-d.closed:
			err = backend.ErrClosed
		}
		if timer != nil {
			timer.Stop()
		}
		if err != nil {
			d.leave(q, w, time.Time{}, false)
			return nil, err
		}
	}
}

// awaitReady waits for sub's SUBSCRIBE to be confirmed, at most maxWait:
// if the confirmation is late, the head tries anyway and polls.
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

// leave takes w out of q. A head that acquired (grantedUntil is the end of
// its lease) makes the next waiter head without a wake-up: that one waits
// for the next release. A head that gives up passes its wake-up on, if it
// had one or (pass) may have used one. The last waiter out drops the queue
// and its subscription.
func (d *Driver) leave(q *queue, w *waiter, grantedUntil time.Time, pass bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	wasHead := q.head() == w
	q.waiters.Remove(w.elem)
	if !grantedUntil.IsZero() {
		q.until = grantedUntil
	}
	if wasHead {
		if next := q.head(); next != nil {
			if grantedUntil.IsZero() && (w.woken || pass) {
				next.woken = true
			}
			next.poke()
		}
	}
	if q.waiters.Len() == 0 {
		if d.queues[q.name] == q {
			delete(d.queues, q.name)
		}
		d.unsubscribeLocked(q)
	}
}
