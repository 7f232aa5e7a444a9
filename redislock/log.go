package redislock

import (
	"log/slog"

	"github.com/golocker/locker/redislock/internal/redislog"
)

// CaptureGoRedisLog makes go-redis's logger send its messages to the
// loggers of the open drivers of this package and of package redlock (the
// Clients' loggers, locker.WithLogger, which discard by default) and
// nowhere else.
//
// go-redis has one logger for the whole process, with no logger per
// client, and by default it prints on stderr: a failed dial ("redis:
// connection pool: failed to dial after 5 attempts"), a reconnection, a
// Cluster's slots reloaded, and each master a Sentinel client finds
// ("sentinel: new master=..."), also on opening. Opening a driver never
// changes that logger: call CaptureGoRedisLog once, at start-up, in a
// program whose go-redis clients are all redislock's (it replaces what
// redis.SetLogger set before, for every client), or set go-redis's
// logger yourself.
func CaptureGoRedisLog() { redislog.Capture() }

// SetLogger implements backend.LogSetter: go-redis's messages go to l
// while the Driver is open, once the program has called
// CaptureGoRedisLog.
func (d *Driver) SetLogger(l *slog.Logger) {
	if !d.isClosed() {
		redislog.Set(d, l)
	}
}
