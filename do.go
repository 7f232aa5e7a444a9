package locker

import (
	"context"
	"errors"
	"fmt"
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
	busy Busy
	wait time.Duration // > 0: wait at most this long (then busy applies)
}

// OnBusy sets what Do does when another owner holds the lock.
func OnBusy(b Busy) DoOption {
	return func(c *doConfig) error {
		if b < Wait || b > Skip {
			return fmt.Errorf("%w: unknown Busy policy %d", ErrInvalidOption, b)
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
			return fmt.Errorf("%w: WaitAtMost(%v) must be positive", ErrInvalidOption, d)
		}
		c.wait = d
		return nil
	}
}

// Do runs fn while holding m: it locks m (by default waiting as Lock does;
// see OnBusy and WaitAtMost), runs fn with a ctx that is cancelled — with
// cause ErrLost — if the hold is lost, and unlocks m when fn returns or
// panics. The error is fn's, joined with Unlock's when that fails; a hold
// lost while fn ran is always reported, since fn may have overlapped another
// owner.
func Do(ctx context.Context, m *Mutex, fn func(ctx context.Context) error, opts ...DoOption) (err error) {
	switch {
	case m == nil:
		return fmt.Errorf("locker: do: %w: nil Mutex", ErrInvalidOption)
	case fn == nil:
		return opErr("do", m.Name(), fmt.Errorf("%w: nil function", ErrInvalidOption))
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
	held, err := acquireFor(ctx, m, cfg)
	if err != nil {
		return err
	}
	if !held {
		if cfg.busy == Skip {
			return nil
		}
		return opErr("do", m.Name(), ErrBusy)
	}
	lost := m.Lost()
	runCtx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	go func() {
		select {
		case <-lost:
			cancel(opErr("do", m.Name(), ErrLost))
		case <-stop:
		}
	}()
	defer func() {
		close(stop)
		cancel(nil)
		if uerr := m.Unlock(context.WithoutCancel(ctx)); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	return fn(runCtx)
}

// acquireFor takes m as cfg says: it reports false when the lock stayed busy.
func acquireFor(ctx context.Context, m *Mutex, cfg doConfig) (bool, error) {
	switch {
	case cfg.wait > 0:
		return m.LockTimeout(ctx, cfg.wait)
	case cfg.busy == Wait:
		return true, m.Lock(ctx)
	default:
		return m.TryLock(ctx)
	}
}
