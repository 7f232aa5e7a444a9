package locker

import (
	"context"
	"errors"
	"time"
)

// ErrBusy is returned by Do when the lock is held elsewhere and the busy
// policy is FailFast (or a WaitAtMost wait ran out).
var ErrBusy = newError("busy: held by another owner")

// Busy is what Do does when another owner holds the lock.
type Busy int

const (
	// Wait until the lock is free or ctx ends (the default).
	Wait Busy = iota
	// FailFast returns ErrBusy at once.
	FailFast
	// Skip returns nil without running fn: for a job that must run once
	// somewhere, not once everywhere (a scheduled task on every replica).
	Skip
)

// DoOption configures Do.
type DoOption func(*doConfig) error

type doConfig struct {
	busy  Busy
	wait  time.Duration // > 0: wait at most this long (then busy applies)
	mutex []Option      // for Client.Do and NameTemplate.Do
}

// MutexOptions sets the options of the handle that Client.Do and
// NameTemplate.Do create (WithTTL, WithFixedLease...). Do ignores it.
func MutexOptions(opts ...Option) DoOption {
	return func(c *doConfig) error {
		c.mutex = append(c.mutex, opts...)
		return nil
	}
}

// Do runs fn while holding the lock name: NewMutex and Do in one call.
func (c *Client) Do(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...DoOption) error {
	var cfg doConfig
	for _, o := range opts {
		if o != nil {
			if err := o(&cfg); err != nil {
				return opErr("do", name, err)
			}
		}
	}
	return Do(ctx, c.NewMutex(name, cfg.mutex...), fn, opts...)
}

// OnBusy sets what Do does when another owner holds the lock.
func OnBusy(b Busy) DoOption {
	return func(c *doConfig) error {
		if b < Wait || b > Skip {
			return errorf(ErrInvalidOption, "unknown Busy policy %d", b)
		}
		c.busy = b
		return nil
	}
}

// WaitAtMost makes Do wait at most d for the lock; if it is still held then,
// Do returns ErrBusy (or nil under OnBusy(Skip)).
func WaitAtMost(d time.Duration) DoOption {
	return func(c *doConfig) error {
		if d <= 0 {
			return errorf(ErrInvalidOption, "WaitAtMost(%v) must be positive", d)
		}
		c.wait = d
		return nil
	}
}

// Do runs fn while holding m: it locks m (by default waiting as Lock does;
// see OnBusy and WaitAtMost), runs fn with a ctx that carries the hold and
// is cancelled — with cause ErrLost — if the hold is lost, and unlocks m
// when fn returns or panics. The error is fn's, joined with Unlock's when
// that fails; a hold lost while fn ran is always reported, since fn may have
// overlapped another owner.
//
// The ctx fn receives carries the hold (HoldFromContext: its name, its
// fencing token, its loss) and its owner: a Lock, TryLock, LockTimeout or Do
// of the same lock with it re-enters the hold, and an Unlock with it
// releases one level. Do acts for the owner ctx carries, if any (see
// WithOwner), else for a new one.
func Do(ctx context.Context, m *Mutex, fn func(ctx context.Context) error, opts ...DoOption) (err error) {
	switch {
	case m.zero():
		return opErr("do", "", ErrZeroMutex)
	case fn == nil:
		return opErr("do", m.Name(), errorf(ErrInvalidOption, "nil function"))
	case ctx == nil:
		return opErr("do", m.Name(), ErrNilContext)
	}
	var cfg doConfig
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return opErr("do", m.Name(), err)
		}
	}
	o := ownerOf(ctx)
	if o == nil {
		ctx = WithOwner(ctx)
		o = ownerOf(ctx)
	}
	h, err := acquireFor(ctx, m, cfg)
	if err != nil {
		return err
	}
	if h == nil {
		if cfg.busy == Skip {
			return nil
		}
		return opErr("do", m.Name(), ErrBusy)
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	stop := h.afterLost(func() { cancel(opErr("do", m.Name(), h.lostErr())) })
	defer func() {
		stop()
		cancel(nil)
		if uerr := m.Unlock(context.WithoutCancel(ctx)); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	return fn(withHold(runCtx, o, h))
}

// acquireFor takes m as cfg says: it returns a nil hold when the lock stayed
// busy.
func acquireFor(ctx context.Context, m *Mutex, cfg doConfig) (*hold, error) {
	var h *hold
	var err error
	switch {
	case cfg.wait > 0:
		_, h, err = m.lockOp(ctx, "locktimeout", true, cfg.wait)
	case cfg.busy == Wait:
		_, h, err = m.lockOp(ctx, "lock", true, 0)
	default:
		_, h, err = m.lockOp(ctx, "trylock", false, 0)
	}
	return h, err
}
