package locker

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/golocker/locker/backend"
)

// Waiting. A Client keeps, for each name that one of its owners holds or
// waits for, a lockState: the Client's hold and its waiters in arrival
// order. Only the first waiter asks the store, and only while no owner of
// the Client holds the name; so a driver sees at most one call of a Client
// for a name at a time, and a Client's waiters never poll against each
// other. When a hold ends and the Client has a waiter, the hold is passed
// to it (backend.Passer: no call to the store) or released, and the waiter
// asks the store at once. The store's part of the wait is the driver's
// native wait (backend.Waiter) or, for stores that keep no queue, attempts
// with jittered back-off bounded by the holder's remaining lease and cut
// short by the driver's Watcher.

// lockState is a Client's state for one lock (a name of a kind). It exists
// while an owner of the Client holds or waits for the lock. Guarded by the
// Client's mu.
type lockState struct {
	holds    []*hold   // the Client's holds; a Mutex has at most one
	queue    []*waiter // in arrival order; queue[0] may ask the store
	asking   bool      // queue[0] has been told to ask the store
	weighted bool      // a Semaphore or an RWMutex: holds share the lock
}

// waiter is one acquisition waiting in a lockState.
type waiter struct {
	hd    *handle
	octx  context.Context // the acquisition's ctx, for the Observer
	owner *owner
	// turn (capacity 1) tells it to ask the store, or that a hold was
	// passed to it; while it asks the store for a weighted lock, that one
	// of the Client's holds of the lock ended.
	turn chan struct{}
	// passed is the hold a release passed to it. Guarded by the Client's
	// mu.
	passed *hold
}

// heldBy returns the hold of owner o, which is not ending, or nil. c.mu is
// held.
func (st *lockState) heldBy(o *owner) *hold {
	for _, h := range st.holds {
		if h.owner == o && !o.anon && !h.ending {
			return h
		}
	}
	return nil
}

// ownedBy returns the hold that an unlock through hd with ctx owner o
// acts on (see hold.owns), with a level of hd's side left, or nil. c.mu is
// held.
func (st *lockState) ownedBy(o *owner, hd *handle) *hold {
	for i := len(st.holds) - 1; i >= 0; i-- {
		h := st.holds[i]
		if h.ending || !h.owns(o, hd) {
			continue
		}
		if hd.read && h.reads > 0 || !hd.read && h.levels > 0 {
			return h
		}
	}
	return nil
}

// promoteLocked tells the first waiter of st to ask the store, when it has
// not been told yet and, for a Mutex, no owner of the Client holds the
// name. c.mu is held.
func (c *Client) promoteLocked(st *lockState) {
	if st.asking || len(st.queue) == 0 || !st.weighted && len(st.holds) > 0 {
		return
	}
	st.asking = true
	st.queue[0].signal()
}

func (w *waiter) signal() {
	select {
	case w.turn <- struct{}{}:
	default:
	}
}

// removeLocked takes w out of st's queue; the next waiter may then ask.
// c.mu is held.
func (c *Client) removeLocked(key lockKey, st *lockState, w *waiter) {
	i := slices.Index(st.queue, w)
	if i < 0 {
		return
	}
	st.queue = slices.Delete(st.queue, i, i+1)
	if i == 0 {
		st.asking = false
	}
	c.promoteLocked(st)
	c.dropIfIdleLocked(key, st)
}

// dropIfIdleLocked forgets st once nobody holds or waits for key. c.mu is
// held.
func (c *Client) dropIfIdleLocked(key lockKey, st *lockState) {
	if len(st.holds) == 0 && len(st.queue) == 0 && c.locks[key] == st {
		delete(c.locks, key)
	}
}

// ask asks the store for r once (try), or until it is granted or ctx ends;
// local receives when one of the Client's holds of a weighted lock ends.
func (c *Client) ask(ctx context.Context, r backend.Request, wait bool, local <-chan struct{}) (backend.Lease, error) {
	if !wait {
		return c.d.Acquire(ctx, r)
	}
	r.Queue = r.Kind != backend.Mutex
	return c.poll(ctx, r, local)
}

// Back-off of a waiter whose store keeps no queue: each pause is drawn from
// [next/2, next], next doubles from minBackoff up to maxBackoff, and no
// pause is longer than the holder's remaining lease. A look that finds a
// new holder (its token changed since the last look) starts again from
// minBackoff: the lock is changing hands, and the next release is about
// one hold away. No pause is shorter than the attempt before it took, so a
// waiter spends at most half its time asking, and a slow store is not
// asked faster than it answers.
const (
	minBackoff = 2 * time.Millisecond
	maxBackoff = 250 * time.Millisecond
)

// poll asks for r until it is granted or ctx ends: through the driver's
// native wait when it has one (which returns ErrHeld when it cannot wait
// now, and whose other errors end the wait), else by attempts with
// back-off, cut short by the driver's Watcher. Transient store errors of
// attempts are retried, each time by a new owner: an attempt whose outcome
// was unknown is released by its owner, and a driver may release it again
// later. When ctx ends, the error says what the store last said.
func (c *Client) poll(ctx context.Context, r backend.Request, local <-chan struct{}) (l backend.Lease, err error) {
	if r.Queue {
		if dq, ok := c.d.(backend.Dequeuer); ok {
			// A wait that ends without a grant leaves no place behind
			// (the owner of each attempt whose outcome was unknown, too:
			// see below).
			defer func() {
				if err != nil {
					c.dequeue(ctx, dq, r)
				}
			}()
		}
	}
	attempt := c.d.Acquire
	if c.waiter != nil {
		attempt = c.waiter.AcquireWait
	}
	var wake <-chan struct{}
	if c.watcher != nil {
		ch, stop := c.watcher.Watch(r.Kind, r.Name)
		defer stop()
		wake = ch
	}
	next := minBackoff
	var holder uint64 // the token of the holder the last look found
	var last error    // the last store error other than "held"
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		began := time.Now()
		l, err := attempt(ctx, r)
		if err == nil {
			return l, nil
		}
		took := time.Since(began)
		var he *backend.HeldError
		switch {
		case c.waiter != nil && !errors.Is(err, backend.ErrHeld):
			// The native wait ended on an error of its own.
			return nil, err
		case errors.As(err, &he):
			if he.Token != 0 && he.Token != holder {
				if holder != 0 {
					next = minBackoff
				}
				holder = he.Token
			}
		case errors.Is(err, backend.ErrHeld):
		case ctx.Err() != nil:
			return nil, err
		case permanent(err):
			return nil, err
		default:
			last = err
			if dq, ok := c.d.(backend.Dequeuer); ok && r.Queue {
				c.dequeue(ctx, dq, r)
			}
			r.Owner = c.newOwner()
		}
		pause := next/2 + rand.N(next/2+1)
		next = min(2*next, maxBackoff)
		pause = max(pause, min(took, maxBackoff))
		if he != nil && he.Left > 0 {
			pause = min(pause, he.Left)
		}
		if r.Queue {
			// Ask again well before the place lapses.
			pause = min(pause, r.TTL/3)
		}
		pause = max(pause, time.Millisecond)
		if t == nil {
			t = time.NewTimer(pause)
		} else {
			t.Reset(pause)
		}
		select {
		case <-t.C:
		case <-wake:
		case <-local:
		case <-ctx.Done():
			if last != nil {
				return nil, last
			}
			return nil, ctx.Err()
		}
	}
}

// dequeue takes r.Owner's place off the store's queue, within the release
// timeout, even when ctx is done.
func (c *Client) dequeue(ctx context.Context, dq backend.Dequeuer, r backend.Request) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.releaseTimeout)
	defer cancel()
	if err := dq.Dequeue(dctx, r); err != nil {
		c.cfg.logger.Warn("locker: leaving the queue failed; the place lapses after its lease", "name", r.Name, "err", err)
	}
}

// permanent reports whether a store error ends a wait rather than being
// retried: bad input, a closed driver, a missing ability, a limit that
// another Client set.
func permanent(err error) bool {
	for _, s := range []error{backend.ErrInvalidName, backend.ErrInvalidTTL, backend.ErrClosed, backend.ErrNotSupported, backend.ErrBadURL, ErrInvalidOption, backend.ErrLimitConflict} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// ctxError is the error of an acquisition whose ctx ended while the store
// was failing: it matches the ctx's error and the store's.
type ctxError struct {
	ctx   error
	store error
}

func (e *ctxError) Error() string {
	return e.ctx.Error() + " (last store error: " + e.store.Error() + ")"
}

func (e *ctxError) Unwrap() []error { return []error{e.ctx, e.store} }

// withCtxErr returns the error of a call that failed with err after ctx
// ended: ctx's error, carrying err when err says more.
func withCtxErr(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if err == nil || errors.Is(err, cerr) && err.Error() == cerr.Error() {
		return cerr
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The store's error is a ctx error with more words: keep them.
		if !errors.Is(err, cerr) {
			return &ctxError{ctx: cerr, store: err}
		}
		return err
	}
	return &ctxError{ctx: cerr, store: err}
}
