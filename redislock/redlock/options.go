package redlock

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/golocker/locker/redislock/internal/config"
	"github.com/golocker/locker/redislock/internal/redislog"
)

// Option configures a Driver (New, Open). It is redislock.Option: the
// options of package redislock that apply to RedLock (WithKeyPrefix,
// WithDialer) are those of this package, and redislock.Open takes this
// package's. An option that does not apply to a Driver is an error.
type Option = config.Option

// DefaultKeyPrefix starts the Redis key of every lock unless
// WithKeyPrefix (URL parameter key_prefix) says otherwise.
const DefaultKeyPrefix = "golocker:"

// WithKeyPrefix sets the prefix of every key the Driver writes (default
// DefaultKeyPrefix), so that several applications can share instances
// without sharing locks. It must not contain '{' or '}'. URL parameter:
// key_prefix.
func WithKeyPrefix(prefix string) Option { return config.WithKeyPrefix(prefix) }

// WithDialer makes the clients that Open creates dial through dial (a
// proxy, or a test's conformance.FaultNet). A Driver from New uses its
// clients' own Dialers: set them there.
func WithDialer(dial func(ctx context.Context, network, address string) (net.Conn, error)) Option {
	return config.WithDialer(dial)
}

// WithInstanceTimeout bounds each instance's answer to one acquisition,
// renewal or release (default: TTL/10, at least 10ms and at most 250ms).
// An instance that answers later counts as failed, so one slow instance
// cannot eat the lease. URL parameter: instance_timeout.
func WithInstanceTimeout(d time.Duration) Option { return config.WithInstanceTimeout(d) }

// SetLogger implements backend.LogSetter: go-redis's messages go to l
// while the Driver is open, once the program has called
// redislock.CaptureGoRedisLog.
func (rl *Driver) SetLogger(l *slog.Logger) {
	if !rl.isClosed() {
		redislog.Set(rl, l)
	}
}
