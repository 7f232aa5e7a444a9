package redislock

import (
	"context"
	"net"
	"time"

	"github.com/golocker/locker/internal/driverkit"
	"github.com/golocker/locker/redislock/internal/config"
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

// DefaultKeyPrefix starts the Redis key of every lock unless WithKeyPrefix
// (URL parameter key_prefix) says otherwise.
const DefaultKeyPrefix = "golocker:"

// Option configures a Driver (New, Open), or a RedLock (package redlock,
// whose Option is the same type: Open takes its options for redlock://
// URLs). An option that does not apply to the driver it is given to is an
// error.
type Option = config.Option

// WithDialer makes the clients that Open creates dial through dial (a
// proxy, or a test's conformance.FaultNet). A Driver from New uses its
// client's own Dialer: set it there.
func WithDialer(dial func(ctx context.Context, network, address string) (net.Conn, error)) Option {
	return config.WithDialer(dial)
}

// WithKeyPrefix sets the prefix of every key the driver writes (default
// DefaultKeyPrefix, "golocker:"), so that several applications can share a
// Redis without sharing locks. It must not contain '{' or '}'.
// URL parameter: key_prefix.
func WithKeyPrefix(prefix string) Option { return config.WithKeyPrefix(prefix) }

// WithWaitReplicas makes every successful acquisition wait, with Redis's
// WAIT command, until n replicas have acknowledged it or timeout has
// passed. If fewer did, the lock is released and Acquire fails with an
// error wrapping ErrNotReplicated. See "Failover" in the package doc for
// what this does and does not guarantee. n = 0 turns it off.
// URL parameters: wait_replicas, wait_timeout (default 50ms). Not for
// RedLock.
func WithWaitReplicas(n int, timeout time.Duration) Option {
	return config.WithWaitReplicas(n, timeout)
}

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
// default, keeps the order across Drivers; n is at most 1000. URL
// parameter: batch. Not with WithWaitReplicas, which passes nothing, nor
// for RedLock.
func WithBatch(n int) Option { return config.WithBatch(n) }

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
func WithKeyspaceEvents(on bool) Option { return config.WithKeyspaceEvents(on) }
