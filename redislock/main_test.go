package redislock_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/redislock"
)

// servers holds the Redis deployments shared by this package's tests; each
// starts on the first test that asks for it.
var servers testserver.Shared

var (
	standalone = testserver.NewLazy(&servers, testserver.Redis)
	cluster    = testserver.NewLazy(&servers, testserver.RedisCluster)
	sentinel   = testserver.NewLazy(&servers, testserver.RedisSentinel)
	instances  = testserver.NewLazy(&servers, func(t testserver.TB) []*testserver.RedisServer {
		return testserver.RedisInstances(t, 3)
	})
)

// quiet discards go-redis's log lines (reconnections, sentinel
// discovery), which the fault tests cause on purpose.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Verbose() {
		redis.SetLogger(quiet{})
	}
	code := servers.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// URLs of the shared deployments.

func standaloneURL(t *testing.T) string { return "redis://" + standalone.Get(t).Addr }

func clusterURL(t *testing.T) string {
	return "redis+cluster://" + strings.Join(cluster.Get(t).Addrs(), ",")
}

func sentinelURL(t *testing.T) string { return sentinelURLOf(sentinel.Get(t)) }

func sentinelURLOf(s *testserver.RedisSentinelServer) string {
	return "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/" + s.MasterName
}

func redlockURL(t *testing.T) string { return redlockURLOf(instances.Get(t)) }

func redlockURLOf(rs []*testserver.RedisServer) string {
	addrs := make([]string, len(rs))
	for i, r := range rs {
		addrs[i] = r.Addr
	}
	return "redlock://" + strings.Join(addrs, ",")
}

// testCtx returns a context that ends with a generous bound on the test.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// openAny opens the driver of url, closed when the test ends.
func openAny(t *testing.T, url string, opts ...redislock.Option) backend.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := redislock.Open(ctx, url, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// eventually polls cond until it is true or d has passed.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
