package redislock_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/redislock"
)

// lines records what is written to it, safe for concurrent use: go-redis's
// messages, or a Client's log.
type lines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lines) Printf(_ context.Context, format string, args ...any) {
	_, _ = fmt.Fprintf(l, format+"\n", args...)
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.b.String(), s)
}

// TestGoRedisLogIsLeftAloneUntilCaptured: opening and creating drivers
// leaves go-redis's process-wide logger as the program set it, and
// go-redis's messages go there, not to the Client's logger;
// CaptureGoRedisLog sends them to the Client's logger instead.
func TestGoRedisLogIsLeftAloneUntilCaptured(t *testing.T) {
	// Not parallel: it sets go-redis's logger, which every test shares.
	program := &lines{}
	redis.SetLogger(program)
	t.Cleanup(quietGoRedis)
	ctx := drivertest.Context(t, time.Minute)
	openAny(t, standaloneURL(t))
	openAny(t, redlockURL(t))
	dead := redis.NewClient(&redis.Options{Addr: drivertest.ClosedPort(t), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = dead.Close() })
	d, err := redislock.New(dead)
	if err != nil {
		t.Fatal(err)
	}
	client := &lines{}
	c, err := locker.New(d, locker.WithLogger(slog.New(slog.NewTextHandler(client, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// A lock on a server that refuses connections: go-redis logs the
	// failed dials.
	tryLock := func() {
		t.Helper()
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if ok, err := c.NewMutex("log").TryLock(tctx); ok || err == nil {
			t.Fatalf("TryLock on a closed port = %v, %v; want an error", ok, err)
		}
	}
	const dialed = "failed to dial"
	drivertest.Eventually(t, time.Minute, "go-redis's message in the program's logger", func() bool {
		tryLock()
		return program.has(dialed)
	})
	if client.has(dialed) {
		t.Error("go-redis's message reached the Client's logger before CaptureGoRedisLog")
	}

	redislock.CaptureGoRedisLog()
	drivertest.Eventually(t, time.Minute, "go-redis's message in the Client's logger", func() bool {
		tryLock()
		return client.has("redislock: go-redis: redis: connection pool: " + dialed)
	})
}
