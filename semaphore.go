package locker

import (
	"context"
	"errors"
	"time"

	"github.com/golocker/locker/backend"
)

// Semaphore is a handle on a named counting semaphore: at most its limit of
// permits are held at once, in this process and any other. The limit is
// stored with the name while it is in use: a Semaphore of the same name
// with another limit gets ErrLimitConflict, never more permits than the
// limit the holders agreed on.
//
// Acquire takes n permits, all or nothing. Each grant is one hold — a
// Permit — with its own lease, renewed by the watchdog, its own fencing
// token and its own lost signal; only the Permit releases it. Waiters are
// granted in arrival order, as many as fit: a waiter for n permits is not
// overtaken by waiters for fewer, and wakes when n are free.
//
// A Semaphore and a Mutex (or RWMutex) of the same name are different
// locks. Make one with Client.NewSemaphore; the zero Semaphore returns
// ErrZeroHandle.
type Semaphore struct {
	base handle // the name, the limit and the options; each acquisition weighs its own n
}

// NewSemaphore returns a handle on the semaphore name with limit permits
// (1 to backend.MaxLimit). Options override the Client's defaults. A bad
// name, limit or option, or a driver without semaphores, does not panic:
// every method returns the error.
func (c *Client) NewSemaphore(name string, limit int, opts ...Option) *Semaphore {
	s := &Semaphore{base: c.newHandle(lockKey{backend.Semaphore, name}, int64(limit), 1, opts)}
	if s.base.err == nil && (limit < 1 || limit > backend.MaxLimit) {
		s.base.err = errorf(ErrInvalidOption, "semaphore limit %d (must be 1 to %d)", limit, backend.MaxLimit)
	}
	return s
}

func (s *Semaphore) zero() bool { return s == nil || s.base.c == nil }

// Name returns the semaphore's name.
func (s *Semaphore) Name() string {
	if s.zero() {
		return ""
	}
	return s.base.key.name
}

// Limit returns the semaphore's number of permits.
func (s *Semaphore) Limit() int {
	if s.zero() {
		return 0
	}
	return int(s.base.limit)
}

// acquireOp takes n permits for an owner of their own.
func (s *Semaphore) acquireOp(ctx context.Context, n int, wait bool, timeout time.Duration) (*Permit, error) {
	op := semaphoreOps.of(wait, timeout)
	if s.zero() {
		return nil, opErr(op, "", ErrZeroHandle)
	}
	hd := &handle{}
	*hd = s.base
	hd.cur, hd.last = nil, nil
	if hd.err == nil && (n < 1 || int64(n) > hd.limit) {
		hd.err = errorf(ErrInvalidOption, "%d permits of a semaphore of %d (must be 1 to %d)", n, hd.limit, hd.limit)
	}
	hd.weight = int64(n)
	_, h, err := hd.lockOp(ctx, op, wait, timeout, &owner{})
	if h == nil {
		return nil, err
	}
	return &Permit{h: h}, err
}

// Acquire waits until n permits are held or ctx ends; it then returns an
// error that matches ctx's error. A nil error means the Permit holds them.
func (s *Semaphore) Acquire(ctx context.Context, n int) (*Permit, error) {
	return s.acquireOp(ctx, n, true, 0)
}

// TryAcquire takes n permits if they are free and nobody waits before it,
// without waiting: a nil Permit and a nil error when they are not.
func (s *Semaphore) TryAcquire(ctx context.Context, n int) (*Permit, error) {
	return s.acquireOp(ctx, n, false, 0)
}

// AcquireTimeout waits at most wait for n permits: a nil Permit and a nil
// error when the wait ran out, an error when ctx ended or the store
// failed. A wait of zero or less tries once, as TryAcquire.
func (s *Semaphore) AcquireTimeout(ctx context.Context, n int, wait time.Duration) (*Permit, error) {
	return s.acquireOp(ctx, n, wait > 0, wait)
}

// Do runs fn while holding n permits: it acquires them (waiting, unless
// OnBusy or WaitAtMost say otherwise, as for locker.Do), runs fn with a
// ctx that carries the Permit's hold (HoldFromContext) and is cancelled if
// it is lost, and releases it when fn returns or panics.
func (s *Semaphore) Do(ctx context.Context, n int, fn func(ctx context.Context) error, opts ...DoOption) (err error) {
	switch {
	case s.zero():
		return opErr("do", "", ErrZeroHandle)
	case fn == nil:
		return opErr("do", s.Name(), errorf(ErrInvalidOption, "nil function"))
	case ctx == nil:
		return opErr("do", s.Name(), ErrNilContext)
	}
	var cfg doConfig
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return opErr("do", s.Name(), err)
		}
	}
	var p *Permit
	switch {
	case cfg.wait > 0:
		p, err = s.AcquireTimeout(ctx, n, cfg.wait)
	case cfg.busy == Wait:
		p, err = s.Acquire(ctx, n)
	default:
		p, err = s.TryAcquire(ctx, n)
	}
	if err != nil {
		return err
	}
	if p == nil {
		if cfg.busy == Skip {
			return nil
		}
		return opErr("do", s.Name(), ErrBusy)
	}
	o := ownerOf(ctx)
	if o == nil {
		ctx = WithOwner(ctx)
		o = ownerOf(ctx)
	}
	h := p.h
	runCtx, cancel := context.WithCancelCause(ctx)
	stop := h.afterLost(func() { cancel(opErr("do", s.Name(), h.lostErr())) })
	defer func() {
		stop()
		cancel(nil)
		if rerr := p.Release(context.WithoutCancel(ctx)); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	return fn(h.carry(runCtx, o))
}

// Permit is a grant of permits of a Semaphore: one hold, with its lease,
// token and lost signal. A nil *Permit holds nothing.
type Permit struct{ h *hold }

// Name returns the semaphore's name.
func (p *Permit) Name() string {
	if p == nil {
		return ""
	}
	return p.h.hd.key.name
}

// Count returns how many permits the grant holds.
func (p *Permit) Count() int {
	if p == nil {
		return 0
	}
	return int(p.h.hd.weight)
}

// Token returns the grant's fencing token, greater than every token
// granted before it for the semaphore's name (0 when the driver has no
// fencing).
func (p *Permit) Token() uint64 {
	if p == nil {
		return 0
	}
	return p.h.token
}

// Lost returns a channel that is closed if the grant is lost before
// Release: its lease ran out before a renewal succeeded, the store dropped
// it, or the Client was closed. A normal Release does not close it.
func (p *Permit) Lost() <-chan struct{} {
	if p == nil {
		return nil
	}
	return p.h.lostChan()
}

// Err returns nil while the grant lasts, and an error wrapping ErrLost (or
// ErrClosed) once it is lost.
func (p *Permit) Err() error {
	if p == nil {
		return ErrNotHeld
	}
	return p.h.lostErr()
}

// Release gives the permits back, owner-checked on the store, even when
// ctx is done (bounded by WithReleaseTimeout). It returns ErrNotHeld when
// the Permit was released before, and ErrLost when the grant had been lost.
func (p *Permit) Release(ctx context.Context) error {
	const op = "release"
	switch {
	case p == nil:
		return opErr(op, "", ErrNotHeld)
	case ctx == nil:
		return opErr(op, p.Name(), ErrNilContext)
	}
	h := p.h
	c := h.hd.c
	c.mu.Lock()
	if h.ending {
		c.mu.Unlock()
		return opErr(op, p.Name(), ErrNotHeld)
	}
	h.levels = 0
	h.ending = true
	c.mu.Unlock()
	return opErr(op, p.Name(), c.end(ctx, h))
}
