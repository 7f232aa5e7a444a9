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

// Do runs fn while holding l — a *Mutex, an *RWMutex (its write side), an
// RWMutex's RLocker, or a *MultiLock: it locks l (by default waiting as Lock
// does; see OnBusy and WaitAtMost), runs fn with a ctx that carries the hold
// and is cancelled — with cause ErrLost — if the hold is lost (any of a
// MultiLock's), and unlocks l when fn returns or panics. The error is fn's,
// joined with Unlock's when that fails; a hold lost while fn ran is always
// reported, since fn may have overlapped another owner. A Locker of another
// package is refused with ErrInvalidOption: Do could not learn of its loss.
//
// The ctx fn receives carries the hold (HoldFromContext: its name, its
// fencing token, its loss) and its owner: a Lock, TryLock, LockTimeout or Do
// of the same lock with it re-enters the hold, and an Unlock with it
// releases one level. Do acts for the owner ctx carries, if any (see
// WithOwner), else for a new one.
func Do(ctx context.Context, l Locker, fn func(ctx context.Context) error, opts ...DoOption) (err error) {
	d, ok := l.(doable)
	switch {
	case l == nil:
		return opErr("do", "", ErrZeroMutex)
	case !ok:
		return opErr("do", "", errorf(ErrInvalidOption, "Do takes the Lockers of package locker, not a %T", l))
	}
	name := d.lockName()
	switch {
	case fn == nil:
		return opErr("do", name, errorf(ErrInvalidOption, "nil function"))
	case ctx == nil:
		return opErr("do", name, ErrNilContext)
	}
	var cfg doConfig
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return opErr("do", name, err)
		}
	}
	o := ownerOf(ctx)
	if o == nil {
		ctx = WithOwner(ctx)
		o = ownerOf(ctx)
	}
	var h held
	switch {
	case cfg.wait > 0:
		h, err = d.doLock(ctx, true, cfg.wait)
	default:
		h, err = d.doLock(ctx, cfg.busy == Wait, 0)
	}
	if err != nil {
		return err
	}
	if h == nil {
		if cfg.busy == Skip {
			return nil
		}
		return opErr("do", name, ErrBusy)
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	stop := h.afterLost(func() { cancel(opErr("do", name, h.lostErr())) })
	defer func() {
		stop()
		cancel(nil)
		if uerr := l.Unlock(context.WithoutCancel(ctx)); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	return fn(h.carry(runCtx, o))
}

// doable is a Locker of this package, which Do can take.
type doable interface {
	Locker
	// doLock is Lock (wait, no timeout), TryLock (no wait) or
	// LockTimeout: a nil held and no error when the lock stayed busy.
	doLock(ctx context.Context, wait bool, timeout time.Duration) (held, error)
	lockName() string
}

// held is what Do needs of what doLock took: its loss, and the ctx that
// carries it.
type held interface {
	afterLost(f func()) (stop func())
	lostErr() error
	// carry returns ctx carrying the hold(s), held by o.
	carry(ctx context.Context, o *owner) context.Context
}

// ops names the three forms of an acquisition for the Observer and in
// errors: the waiting one, the try, the one with a timeout.
type ops [3]string

var (
	mutexOps     = ops{"lock", "trylock", "locktimeout"}
	readOps      = ops{"rlock", "tryrlock", "rlocktimeout"}
	semaphoreOps = ops{"acquire", "tryacquire", "acquiretimeout"}
)

// of returns the name of the form that wait and timeout make.
func (o ops) of(wait bool, timeout time.Duration) string {
	switch {
	case timeout > 0:
		return o[2]
	case wait:
		return o[0]
	}
	return o[1]
}
