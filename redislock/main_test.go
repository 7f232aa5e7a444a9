package redislock_test

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/redislock"
)

// servers holds the Redis deployments shared by this package's tests; each
// starts on the first test that asks for it.
var servers testserver.Shared

var (
	standalone = testserver.NewLazy(&servers, redisserver.Redis)
	persistent = testserver.NewLazy(&servers, func(t testserver.TB) *redisserver.RedisServer {
		return redisserver.RedisWith(t, redisserver.RedisOptions{Persistence: true})
	})
	cluster   = testserver.NewLazy(&servers, redisserver.RedisCluster)
	sentinel  = testserver.NewLazy(&servers, redisserver.RedisSentinel)
	instances = testserver.NewLazy(&servers, func(t testserver.TB) []*redisserver.RedisServer {
		return redisserver.RedisInstances(t, 3)
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
	os.Exit(drivertest.Main(m, &servers))
}

// URLs of the shared deployments.

func standaloneURL(t *testing.T) string { return standaloneURLOf(t) }

func standaloneURLOf(t testing.TB) string { return "redis://" + standalone.Get(t).Addr }

func clusterURL(t *testing.T) string {
	return "redis+cluster://" + strings.Join(cluster.Get(t).Addrs(), ",")
}

func sentinelURL(t *testing.T) string { return sentinelURLOf(sentinel.Get(t)) }

func sentinelURLOf(s *redisserver.RedisSentinelServer) string {
	return "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/" + s.MasterName
}

func redlockURL(t *testing.T) string { return redlockURLOf(instances.Get(t)) }

func redlockURLOf(rs []*redisserver.RedisServer) string {
	addrs := make([]string, len(rs))
	for i, r := range rs {
		addrs[i] = r.Addr
	}
	return "redlock://" + strings.Join(addrs, ",")
}

// openAny opens the driver of url, closed when the test ends.
func openAny(t *testing.T, url string, opts ...redislock.Option) backend.Driver {
	t.Helper()
	return drivertest.Open(t, url, func(ctx context.Context) (backend.Driver, error) { return redislock.Open(ctx, url, opts...) })
}
