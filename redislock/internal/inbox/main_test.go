package inbox

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/redisserver"
)

var (
	servers    testserver.Shared
	standalone = testserver.NewLazy(&servers, redisserver.Redis)
)

func TestMain(m *testing.M) { os.Exit(drivertest.Main(m, &servers)) }

// client returns a go-redis client of the shared server, closed when the
// test ends.
func client(t *testing.T) (*redis.Client, context.Context) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: standalone.Get(t).Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c, drivertest.Context(t, time.Minute)
}
