package redislock

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"
)

// go-redis has one logger for the whole process, which prints on stderr by
// default ("redis: connection pool: failed to dial after 5 attempts").
// redislock replaces it, when it creates its first Driver, by one that
// sends each message to the loggers of the open Drivers — the Clients'
// loggers (locker.WithLogger, through backend.LogSetter), which discard by
// default — and nowhere else. A program that wants go-redis's messages
// elsewhere calls redis.SetLogger after opening its first Driver.
var goRedisLog struct {
	once    sync.Once
	mu      sync.Mutex
	loggers map[any]*slog.Logger // by Driver or RedLock
}

// forwardLog is go-redis's logger while redislock's is installed.
type forwardLog struct{}

func (forwardLog) Printf(ctx context.Context, format string, args ...any) {
	goRedisLog.mu.Lock()
	seen := make(map[*slog.Logger]bool, len(goRedisLog.loggers))
	var ls []*slog.Logger
	for _, l := range goRedisLog.loggers {
		if !seen[l] {
			seen[l] = true
			ls = append(ls, l)
		}
	}
	goRedisLog.mu.Unlock()
	if len(ls) == 0 {
		return
	}
	msg := fmt.Sprintf(format, args...)
	for _, l := range ls {
		l.WarnContext(ctx, "redislock: go-redis: "+msg)
	}
}

// installLog makes forwardLog go-redis's logger, once.
func installLog() {
	goRedisLog.once.Do(func() {
		goRedisLog.loggers = make(map[any]*slog.Logger)
		redis.SetLogger(forwardLog{})
	})
}

// SetLogger implements backend.LogSetter: go-redis's messages go to l while
// the Driver is open.
func (d *Driver) SetLogger(l *slog.Logger) { setLogger(d, l, d.isClosed()) }

// SetLogger implements backend.LogSetter: go-redis's messages go to l while
// the RedLock is open.
func (rl *RedLock) SetLogger(l *slog.Logger) { setLogger(rl, l, rl.isClosed()) }

func setLogger(owner any, l *slog.Logger, closed bool) {
	if l == nil || closed {
		return
	}
	goRedisLog.mu.Lock()
	goRedisLog.loggers[owner] = l
	goRedisLog.mu.Unlock()
}

// forgetLogger stops sending go-redis's messages to owner's logger.
func forgetLogger(owner any) {
	goRedisLog.mu.Lock()
	delete(goRedisLog.loggers, owner)
	goRedisLog.mu.Unlock()
}
