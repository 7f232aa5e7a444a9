package redislock

import (
	"context"
	"net"
	"time"

	"github.com/golocker/locker/internal/driverkit"
)

// maxWait caps every wait between two tries of a waiting Acquire. Pub/sub
// is at-most-once (a reconnect loses messages), so a waiter never trusts it
// alone for longer than this, nor longer than the holder's remaining lease.
const maxWait = time.Second

// DefaultOpenTimeout bounds Open when its ctx has no deadline.
const DefaultOpenTimeout = driverkit.OpenTimeout

// cleanupTimeout bounds the release of a grant that may have happened while
// Acquire failed (its ctx ended after the request was sent).
const cleanupTimeout = 2 * time.Second

// Option configures a Driver (New, Open) or a RedLock (NewRedLock). An
// option that does not apply to the driver it is given to is an error.
type Option func(*options) error

type options struct {
	keyPrefix        string
	waitReplicas     int
	waitTimeout      time.Duration
	instanceTimeout  time.Duration
	batch            int
	keyspaceEvents   *bool // nil: Open asks the servers, New assumes none
	directCalls      int   // acquire calls sent on their own at a time (coalesce.go); tests set 0
	driverkit.Common       // the dialer of the clients opened from a URL, the options set
}

func defaultOptions() options {
	return options{keyPrefix: DefaultKeyPrefix, directCalls: directCalls}
}

// refuse returns an error if one of the named options was set.
func (o *options) refuse(driver string, names ...string) error {
	return o.Refuse("redislock", driver, names...)
}

// optionError reports a bad option. It matches locker.ErrInvalidOption
// with errors.Is.
func optionError(format string, args ...any) error {
	return driverkit.BadOption("redislock", format, args...)
}

// WithDialer makes the clients that Open creates dial through dial (a
// proxy, or a test's conformance.FaultNet). A Driver from New uses its
// client's own Dialer: set it there.
func WithDialer(dial func(ctx context.Context, network, address string) (net.Conn, error)) Option {
	return driverkit.WithDialer[options]("redislock", dial)
}

// WithKeyPrefix sets the prefix of every key the driver writes (default
// DefaultKeyPrefix, "golocker:"), so that several applications can share a
// Redis without sharing locks. It must not contain '{' or '}'.
// URL parameter: key_prefix.
func WithKeyPrefix(prefix string) Option {
	return func(o *options) error {
		if err := validKeyPrefix(prefix); err != nil {
			return optionError("%v", err)
		}
		o.keyPrefix = prefix
		o.Set("WithKeyPrefix")
		return nil
	}
}

// WithWaitReplicas makes every successful acquisition wait, with Redis's
// WAIT command, until n replicas have acknowledged it or timeout has
// passed. If fewer did, the lock is released and Acquire fails with an
// error wrapping ErrNotReplicated. See "Failover" in the package doc for
// what this does and does not guarantee. n = 0 turns it off.
// URL parameters: wait_replicas, wait_timeout (default 50ms). Not for
// RedLock.
func WithWaitReplicas(n int, timeout time.Duration) Option {
	return func(o *options) error {
		if n < 0 {
			return optionError("wait replicas %d, must not be negative", n)
		}
		if n > 0 && timeout <= 0 {
			return optionError("wait timeout %v, must be positive (WAIT with 0 would block for ever)", timeout)
		}
		o.waitReplicas, o.waitTimeout = n, timeout
		o.Set("WithWaitReplicas")
		return nil
	}
}

// maxBatch bounds WithBatch.
const maxBatch = 1000

// WithBatch lets a Driver pass the lock to up to n of its own waiters in a
// row while another process's (or Driver's) waiter waits for it: bounded
// overtaking instead of first come, first served across Drivers. Within
// the Driver, waiters still take turns in arrival order; after n such
// passes the lock goes to the oldest waiter in Redis. A hand-off between
// Drivers costs a round trip to Redis and a pub/sub message, a pass none,
// so with several processes contending for one lock, a batch of n turns
// all but 1 in n+1 hand-offs into passes (bench/README.md has the
// figures). The price: a waiter of another Driver can wait up to n more
// holds, and the Driver no longer declares FIFO (Capabilities). n = 0, the
// default, keeps the order across Drivers. URL parameter: batch. Not with
// WithWaitReplicas, which passes nothing, nor for RedLock.
func WithBatch(n int) Option {
	return func(o *options) error {
		if n < 0 || n > maxBatch {
			return optionError("batch %d, must be 0 to %d", n, maxBatch)
		}
		o.batch = n
		o.Set("WithBatch")
		return nil
	}
}

// WithKeyspaceEvents says whether the servers publish the keyspace events
// of the lock keys: notify-keyspace-events includes K, g and x (for
// example "Kgx", or "KA"). With true, the Driver watches the keys of its
// holds and a hold whose key is deleted — ForceRelease, DEL or UNLINK by
// hand, an expiry, an eviction — is reported lost at once (Lease.Lost,
// Capabilities.LostSignal); see "Lost holds" in the package doc. Without
// this option, Open asks the servers (CONFIG GET) and watches when every
// master has the setting; New, which does no I/O, does not watch. Open
// with true fails if a server says it lacks the setting; a server that
// does not answer CONFIG GET (a managed service) is taken at its word.
// URL parameter: keyspace_events. Not for RedLock.
func WithKeyspaceEvents(on bool) Option {
	return func(o *options) error {
		o.keyspaceEvents = &on
		o.Set("WithKeyspaceEvents")
		return nil
	}
}

// WithInstanceTimeout bounds each RedLock instance's answer to one
// acquisition, renewal or release (default: TTL/10, at least 10ms and at
// most 250ms). An instance that answers later counts as failed, so one
// slow instance cannot eat the lease. URL parameter: instance_timeout.
// Only for RedLock.
func WithInstanceTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return optionError("instance timeout %v, must be positive", d)
		}
		o.instanceTimeout = d
		o.Set("WithInstanceTimeout")
		return nil
	}
}
