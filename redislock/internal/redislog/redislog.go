// Package redislog sends go-redis's log messages to the loggers of the
// open redislock drivers, once the program asks for it (Capture).
//
// go-redis has one logger for the whole process, which prints on stderr by
// default ("redis: connection pool: failed to dial after 5 attempts") and
// has no logger per client. A driver never replaces it behind the
// program's back: Capture, which the program calls through
// redislock.CaptureGoRedisLog, makes it forward each message to the
// loggers of the open drivers — the Clients' loggers (locker.WithLogger,
// through backend.LogSetter), which discard by default — and nowhere else.
package redislog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"
)

// loggers are the open drivers' loggers, by driver.
var loggers struct {
	mu sync.Mutex
	by map[any]*slog.Logger
}

// Capture makes go-redis's logger forward to the loggers of the open
// drivers, replacing the one redis.SetLogger set last.
func Capture() { redis.SetLogger(forward{}) }

// forward is go-redis's logger once captured.
type forward struct{}

func (forward) Printf(ctx context.Context, format string, args ...any) {
	loggers.mu.Lock()
	seen := make(map[*slog.Logger]bool, len(loggers.by))
	var ls []*slog.Logger
	for _, l := range loggers.by {
		if !seen[l] {
			seen[l] = true
			ls = append(ls, l)
		}
	}
	loggers.mu.Unlock()
	if len(ls) == 0 {
		return
	}
	msg := fmt.Sprintf(format, args...)
	for _, l := range ls {
		l.WarnContext(ctx, "redislock: go-redis: "+msg)
	}
}

// Set makes l the logger of driver, an open Driver or RedLock (nil l:
// none).
func Set(driver any, l *slog.Logger) {
	if l == nil {
		return
	}
	loggers.mu.Lock()
	defer loggers.mu.Unlock()
	if loggers.by == nil {
		loggers.by = make(map[any]*slog.Logger)
	}
	loggers.by[driver] = l
}

// Forget drops the logger of driver, which closes.
func Forget(driver any) {
	loggers.mu.Lock()
	defer loggers.mu.Unlock()
	delete(loggers.by, driver)
}
