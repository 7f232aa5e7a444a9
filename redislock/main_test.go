package redislock_test

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/redislock"
)

// servers holds the Redis deployments shared by this package's tests; each
// starts on the first test that asks for it.
var servers testserver.Shared

// The shared standalone, persistent, Cluster and Sentinel deployments
// publish keyspace events (notify-keyspace-events), so that the Drivers
// opened on them watch their keys and declare LostSignal; the tests that
// start servers of their own, and the RedLock instances, leave the setting
// at Redis's default (none).
var (
	standalone = testserver.NewLazy(&servers, func(t testserver.TB) *redisserver.RedisServer {
		srv := redisserver.Redis(t)
		publishKeyspaceEvents(t, srv)
		return srv
	})
	persistent = testserver.NewLazy(&servers, func(t testserver.TB) *redisserver.RedisServer {
		// On the command line: the suite restarts this server.
		return redisserver.RedisWith(t, redisserver.RedisOptions{Persistence: true, Args: []string{"--notify-keyspace-events", keyspaceEvents}})
	})
	cluster = testserver.NewLazy(&servers, func(t testserver.TB) *redisserver.RedisClusterServer {
		c := redisserver.RedisCluster(t)
		publishKeyspaceEvents(t, c.Nodes...)
		return c
	})
	sentinel = testserver.NewLazy(&servers, func(t testserver.TB) *redisserver.RedisSentinelServer {
		s := redisserver.RedisSentinel(t)
		srvs := s.Servers
		if len(srvs) == 0 { // named by the environment: its master, at least
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			m, err := s.Master(ctx)
			if err != nil {
				t.Fatalf("the Sentinel setup's master: %v", err)
			}
			srvs = append(srvs, m)
		}
		publishKeyspaceEvents(t, srvs...)
		return s
	})
	instances = testserver.NewLazy(&servers, func(t testserver.TB) []*redisserver.RedisServer {
		return redisserver.RedisInstances(t, 3)
	})
)

// keyspaceEvents is the notify-keyspace-events setting of the shared
// deployments: the keyspace events (K) of generic commands (g) and
// expiries (x), what a Driver watches.
const keyspaceEvents = "Kgx"

// publishKeyspaceEvents turns on keyspace events on each server.
func publishKeyspaceEvents(t testserver.TB, srvs ...*redisserver.RedisServer) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, srv := range srvs {
		if _, err := srv.Do(ctx, "CONFIG", "SET", "notify-keyspace-events", keyspaceEvents); err != nil {
			t.Fatalf("CONFIG SET notify-keyspace-events on %s: %v", srv.Addr, err)
		}
	}
}

// quiet discards go-redis's log lines (reconnections, sentinel
// discovery), which the fault tests cause on purpose.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// quietGoRedis makes go-redis's process-wide logger quiet, unless the
// tests run verbose: then go-redis's own, on stderr.
func quietGoRedis() {
	if testing.Verbose() {
		logging.Enable()
	} else {
		redis.SetLogger(quiet{})
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	quietGoRedis()
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
