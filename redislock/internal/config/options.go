// Package config is what configures redislock's drivers, the Driver and
// RedLock: their options, the URLs they are opened from, and the go-redis
// clients a URL makes. Packages redislock and redlock document the options
// and URL parameters to their users.
package config

import (
	"time"

	"github.com/golocker/locker/internal/driverkit"
	"github.com/golocker/locker/redislock/internal/keys"
)

// Option configures a Driver or a RedLock. An option that does not apply
// to the driver it is given to is an error.
type Option func(*Options) error

// Options are the settings of a Driver or a RedLock.
type Options struct {
	KeyPrefix        string
	WaitReplicas     int
	WaitTimeout      time.Duration
	InstanceTimeout  time.Duration // RedLock; 0: the default of the lease
	Batch            int
	KeyspaceEvents   *bool // nil: Open asks the servers, New assumes none
	driverkit.Common       // the dialer of the clients opened from a URL, the options set
}

// Defaults returns the options before any is applied.
func Defaults() Options { return Options{KeyPrefix: keys.DefaultPrefix} }

// Refuse returns an error if one of the named options was set: they do
// not apply to driver ("RedLock").
func (o *Options) Refuse(driver string, names ...string) error {
	return o.Common.Refuse("redislock", driver, names...)
}

// BadOption reports a bad option. It matches locker.ErrInvalidOption with
// errors.Is.
func BadOption(format string, args ...any) error {
	return driverkit.BadOption("redislock", format, args...)
}

// WithDialer is redislock.WithDialer.
func WithDialer(dial driverkit.DialFunc) Option {
	return driverkit.WithDialer[Options]("redislock", dial)
}

// WithKeyPrefix is redislock.WithKeyPrefix.
func WithKeyPrefix(prefix string) Option {
	return func(o *Options) error {
		if err := keys.ValidPrefix(prefix); err != nil {
			return BadOption("%v", err)
		}
		o.KeyPrefix = prefix
		o.Set("WithKeyPrefix")
		return nil
	}
}

// WithWaitReplicas is redislock.WithWaitReplicas.
func WithWaitReplicas(n int, timeout time.Duration) Option {
	return func(o *Options) error {
		if n < 0 {
			return BadOption("wait replicas %d, must not be negative", n)
		}
		if n > 0 && timeout <= 0 {
			return BadOption("wait timeout %v, must be positive (WAIT with 0 would block for ever)", timeout)
		}
		o.WaitReplicas, o.WaitTimeout = n, timeout
		o.Set("WithWaitReplicas")
		return nil
	}
}

// MaxBatch bounds WithBatch.
const MaxBatch = 1000

// WithBatch is redislock.WithBatch.
func WithBatch(n int) Option {
	return func(o *Options) error {
		if n < 0 || n > MaxBatch {
			return BadOption("batch %d, must be 0 to %d", n, MaxBatch)
		}
		o.Batch = n
		o.Set("WithBatch")
		return nil
	}
}

// WithKeyspaceEvents is redislock.WithKeyspaceEvents.
func WithKeyspaceEvents(on bool) Option {
	return func(o *Options) error {
		o.KeyspaceEvents = &on
		o.Set("WithKeyspaceEvents")
		return nil
	}
}

// WithInstanceTimeout is redlock.WithInstanceTimeout.
func WithInstanceTimeout(d time.Duration) Option {
	return func(o *Options) error {
		if d <= 0 {
			return BadOption("instance timeout %v, must be positive", d)
		}
		o.InstanceTimeout = d
		o.Set("WithInstanceTimeout")
		return nil
	}
}
