package locker

import (
	"fmt"
	"io"
	"log/slog"
	"time"
)

// DefaultTTL is the lease of a hold when no WithTTL option is given.
const DefaultTTL = 30 * time.Second

// MinTTL is the shortest lease accepted: below it a renewal at TTL/3 cannot
// be relied on to reach the store in time.
const MinTTL = 10 * time.Millisecond

// DefaultReleaseTimeout bounds the release that Unlock and Close perform,
// which runs even when the caller's ctx is already done.
const DefaultReleaseTimeout = 5 * time.Second

// Option configures a Client (as a default for all its handles) or one
// handle from NewMutex. Options are validated where they are used: New and
// Open return the error; NewMutex records it and every method of the handle
// returns it.
type Option func(*config) error

type config struct {
	ttl            time.Duration
	renewEvery     time.Duration // WithRenewInterval; 0: TTL/3
	fixed          bool
	releaseTimeout time.Duration
	logger         *slog.Logger
	observer       Observer
	lostHook       func(HoldEnd)
	crossProcess   bool     // RequireCrossProcess
	clientOnly     []string // names of client-only options that were set
}

func defaultConfig() config {
	return config{
		ttl:            DefaultTTL,
		releaseTimeout: DefaultReleaseTimeout,
		logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(c); err != nil {
			return err
		}
	}
	return nil
}

// WithTTL sets the lease of a hold: the store frees the lock if the owner
// neither renews nor releases it within d. While the owner lives, the
// Client's watchdog renews the lease every d/3 (unless WithFixedLease).
// d must be at least MinTTL.
func WithTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < MinTTL {
			return fmt.Errorf("%w: %v (must be at least %v)", ErrInvalidTTL, d, MinTTL)
		}
		c.ttl = d
		return nil
	}
}

// WithRenewInterval makes the watchdog renew a hold's lease every d
// instead of every TTL/3 (when d is shorter). A renewal is owner-checked on
// the store, so it also finds a hold that was freed by force: on a driver
// without a pushed loss signal, a hold is known lost within about d (lockctl
// run checks every second). Each renewal is a call to the store.
func WithRenewInterval(d time.Duration) Option {
	return func(c *config) error {
		if d < MinTTL/3 {
			return errorf(ErrInvalidOption, "renew interval %v (must be at least %v)", d, MinTTL/3)
		}
		c.renewEvery = d
		return nil
	}
}

// WithFixedLease turns the watchdog off: a hold lasts at most its TTL, and
// Lost closes shortly before the TTL runs out if Unlock has not been called.
func WithFixedLease() Option {
	return func(c *config) error {
		c.fixed = true
		return nil
	}
}

// WithReleaseTimeout bounds how long Unlock and Close wait for the store to
// confirm a release. The release runs even when the caller's ctx is done, so
// that `defer m.Unlock(ctx)` frees the lock after a cancellation.
func WithReleaseTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: release timeout %v must be positive", ErrInvalidOption, d)
		}
		c.releaseTimeout = d
		return nil
	}
}

// WithLogger sets the logger for renewal failures and lost holds (a Client
// option). The default discards; losses are always reported through Lost and
// errors, never only logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		c.logger = l
		c.clientOnly = append(c.clientOnly, "WithLogger")
		return nil
	}
}

// RequireCrossProcess makes Open refuse a driver whose locks other
// processes do not see (the in-process driver), whatever its URL says: for
// programs that run as several processes (a service with replicas, lockctl).
// An Open option; New, given a driver in code, takes it as it is.
func RequireCrossProcess() Option {
	return func(c *config) error {
		c.crossProcess = true
		c.clientOnly = append(c.clientOnly, "RequireCrossProcess")
		return nil
	}
}
