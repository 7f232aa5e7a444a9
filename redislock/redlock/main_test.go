package redlock_test

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/redislock/redlock"
)

// servers holds the instances shared by this package's tests. The
// conformance suite runs on RedLock in package redislock, with the other
// Redis topologies.
var (
	servers   testserver.Shared
	instances = testserver.NewLazy(&servers, func(t testserver.TB) []*redisserver.RedisServer {
		return redisserver.RedisInstances(t, 3)
	})
)

// quiet discards go-redis's log lines, which the tests that kill
// instances cause on purpose.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Verbose() {
		redis.SetLogger(quiet{})
	}
	os.Exit(drivertest.Main(m, &servers))
}

func urlOf(rs []*redisserver.RedisServer) string {
	addrs := make([]string, len(rs))
	for i, r := range rs {
		addrs[i] = r.Addr
	}
	return "redlock://" + strings.Join(addrs, ",")
}

// openClient returns a Client on a Driver opened from url, closed when
// the test ends.
func openClient(t *testing.T, url string, opts ...locker.Option) *locker.Client {
	t.Helper()
	d := drivertest.Open(t, url, func(ctx context.Context) (*redlock.Driver, error) { return redlock.Open(ctx, url) })
	c, err := locker.New(d, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}
