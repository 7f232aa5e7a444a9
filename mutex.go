package locker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/golocker/locker/backend"
)

// Mutex is a handle on one named lock, and the owner of its holds. It is
// reentrant: Lock on a handle that holds the lock increments a hold count,
// and the lock is released when Unlock has been called as many times. A
// Mutex is safe for concurrent use; goroutines that share one share its
// ownership (see the package doc).
type Mutex struct {
	c    *Client
	name string
	cfg  config
	err  error // from NewMutex: returned by every method

	// mu guards the fields below. Backend calls are made without it.
	mu    sync.Mutex
	count int
	h     *hold   // the current hold, nil when not held
	last  *hold   // the most recent hold, for Lost after Unlock
	busy  *flight // an acquisition or release of this handle in flight
}

// flight is an acquisition or release in progress on a handle. Other calls
// on the same handle wait for it rather than racing it to the store.
type flight struct {
	done    chan struct{}
	waiting bool // a blocking acquisition: TryLock must not wait for it
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// HoldCount returns how many times the handle holds the lock: 0 when it does
// not, 1 after Lock, 2 after a re-entry...
func (m *Mutex) HoldCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.count
}

// Token returns the fencing token of the current hold, or 0 when the handle
// holds nothing or the driver has no fencing. Tokens of a name strictly
// increase from holder to holder: pass the token with every write to the
// resource the lock guards, and have the resource refuse a token lower than
// the highest it has seen. That is what makes a lock safe against an owner
// that was paused past its lease.
func (m *Mutex) Token() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil {
		return 0
	}
	return m.h.token
}

// Lost returns a channel that is closed if the current hold is lost before
// Unlock: its lease ran out before a renewal succeeded, the store dropped it,
// a fixed lease ended, or the Client was closed. After Unlock it returns the channel of the hold
// just released, which a normal Unlock does not close. Before the first hold
// it returns nil.
func (m *Mutex) Lost() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h != nil {
		return m.h.lost
	}
	if m.last != nil {
		return m.last.lost
	}
	return nil
}

// Lock waits until the lock is held or ctx ends; it then returns ctx's error.
// On a handle that holds the lock it re-enters at once. On a handle whose
// hold was lost it returns ErrLost until Unlock has been called for every
// level of that hold.
func (m *Mutex) Lock(ctx context.Context) error {
	_, err := m.lock(ctx, "lock", true)
	return err
}

// TryLock takes the lock if no other owner holds it, and never waits for
// another owner. It returns (false, nil) when the lock is held elsewhere, or
// when another goroutine is waiting in Lock on this same handle.
func (m *Mutex) TryLock(ctx context.Context) (bool, error) {
	return m.lock(ctx, "trylock", false)
}

// LockTimeout waits at most wait for the lock. It returns (false, nil) when
// wait ran out, and an error when ctx ended or the store failed. A wait of
// zero or less tries once, as TryLock.
func (m *Mutex) LockTimeout(ctx context.Context, wait time.Duration) (bool, error) {
	const op = "locktimeout"
	if ctx == nil {
		return false, opErr(op, m.name, ErrNilContext)
	}
	if wait <= 0 {
		return m.lock(ctx, op, false)
	}
	deadline := time.Now().Add(wait)
	tctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	ok, err := m.lock(tctx, op, true)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && waitEnded(tctx, deadline) {
		return false, nil
	}
	return ok, err
}

// waitEnded reports whether a DeadlineExceeded from a wait means the wait
// ran out: ctx is done, or the deadline is (nearly) reached — some clients
// (the MongoDB driver) end a call a little before its ctx's timer fires.
// A DeadlineExceeded long before the deadline is a store error instead.
func waitEnded(ctx context.Context, deadline time.Time) bool {
	return ctx.Err() != nil || time.Until(deadline) < 10*time.Millisecond
}

func (m *Mutex) lock(ctx context.Context, op string, wait bool) (bool, error) {
	if ctx == nil {
		return false, opErr(op, m.name, ErrNilContext)
	}
	if m.err != nil {
		return false, opErr(op, m.name, m.err)
	}
	var f *flight
	for f == nil {
		m.mu.Lock()
		if m.h != nil {
			defer m.mu.Unlock()
			if err := m.h.lostErr(); err != nil {
				return false, opErr(op, m.name, err)
			}
			m.count++
			return true, nil
		}
		busy := m.busy
		if busy == nil {
			f = &flight{done: make(chan struct{}), waiting: wait}
			m.busy = f
		}
		m.mu.Unlock()
		if busy != nil {
			if !wait && busy.waiting {
				return false, nil
			}
			select {
			case <-busy.done:
			case <-ctx.Done():
				return false, opErr(op, m.name, ctx.Err())
			}
		}
	}
	ok, err := m.acquire(ctx, wait)
	m.mu.Lock()
	m.busy = nil
	close(f.done)
	m.mu.Unlock()
	return ok, opErr(op, m.name, err)
}

// acquire asks the driver for the lock and, once granted, starts the hold's
// watchdog. It is called by the handle's one flight.
func (m *Mutex) acquire(ctx context.Context, wait bool) (bool, error) {
	c := m.c
	if err := c.begin(); err != nil {
		return false, err
	}
	defer c.ops.Done()
	// Close ends a wait in flight.
	actx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	defer func() {
		stop()
		cancel()
	}()

	start := time.Now()
	l, err := c.d.Acquire(actx, backend.Request{
		Name:  m.name,
		Owner: c.newOwner(),
		TTL:   m.cfg.ttl,
		Wait:  wait,
	})
	switch {
	case err == nil && l == nil:
		return false, errors.New("driver returned neither a lease nor an error")
	case err != nil && !wait && errors.Is(err, backend.ErrHeld):
		return false, nil
	case err != nil && ctx.Err() != nil:
		return false, ctx.Err()
	case err != nil && c.ctx.Err() != nil:
		return false, ErrClosed
	case err != nil:
		return false, err
	}
	// Contract: a nil error means held. A grant that raced with the end of
	// ctx or with Close is given back.
	if ctx.Err() != nil {
		c.release(ctx, l, m.cfg.releaseTimeout)
		return false, ctx.Err()
	}
	// The driver knows when the lease it granted began: when the granting
	// request was sent (a wait can have begun long before), or earlier
	// (redislock passes a lease on with the time it was last set).
	if ls := l.Start(); !ls.IsZero() {
		start = ls
		if now := time.Now(); start.After(now) {
			start = now
		}
	}
	h := newHold(m, l, c.caps, start)
	c.watchLost(h)
	if !c.track(h) {
		h.end()
		c.release(ctx, l, m.cfg.releaseTimeout)
		return false, ErrClosed
	}
	m.mu.Lock()
	m.h, m.last, m.count = h, h, 1
	m.mu.Unlock()
	c.start(h)
	return true, nil
}

// Unlock releases one level of the hold; the last level releases the lock
// on the store, owner-checked. The release runs even when ctx is already
// done (bounded by WithReleaseTimeout), so a deferred Unlock frees the lock
// after a cancellation. Unlock returns ErrNotHeld when the handle holds
// nothing, and ErrLost for each level of a hold that was lost.
func (m *Mutex) Unlock(ctx context.Context) error {
	const op = "unlock"
	if ctx == nil {
		return opErr(op, m.name, ErrNilContext)
	}
	if m.err != nil {
		return opErr(op, m.name, m.err)
	}
	m.mu.Lock()
	h := m.h
	if h == nil {
		m.mu.Unlock()
		if m.c.isClosed() {
			return opErr(op, m.name, ErrClosed)
		}
		return opErr(op, m.name, ErrNotHeld)
	}
	m.count--
	if m.count > 0 {
		m.mu.Unlock()
		return opErr(op, m.name, h.lostErr())
	}
	m.h = nil
	f := &flight{done: make(chan struct{})}
	m.busy = f
	m.mu.Unlock()

	err := m.c.end(ctx, h)

	m.mu.Lock()
	m.busy = nil
	close(f.done)
	m.mu.Unlock()
	return opErr(op, m.name, err)
}

// detach forgets h if it is the handle's current hold (Client.Close).
func (m *Mutex) detach(h *hold) {
	m.mu.Lock()
	if m.h == h {
		m.h, m.count = nil, 0
	}
	m.mu.Unlock()
}

func validName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > backend.MaxNameLen:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidName, len(name), backend.MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidName)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			return fmt.Errorf("%w: contains a NUL byte", ErrInvalidName)
		}
	}
	return nil
}
