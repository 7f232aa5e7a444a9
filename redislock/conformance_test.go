package redislock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/matrix"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/redislock"
)

// suiteTTL is the short lease of the suite's expiry checks.
const suiteTTL = time.Second

// suite is what runSuite needs of a deployment beside its URL.
type suite struct {
	// drop deletes a lock key behind its owner's back.
	drop func(ctx context.Context, key string) error
	// kill, optional: kills the server (the one that matters) and returns
	// the function that restarts it.
	kill func(ctx context.Context) (func(context.Context) error, error)
}

// runSuite runs the conformance suite on the drivers that url opens and
// records the report for the feature matrix under name.
func runSuite(t *testing.T, name, url string, st suite) {
	matrix.Record(t, conformance.Run(t, harness(t, name, url, st)))
}

// harness is the suite's Harness for the drivers that url opens with
// opts.
func harness(t *testing.T, name, url string, st suite, opts ...redislock.Option) conformance.Harness {
	keyer := openAny(t, url).(interface{ Key(string) string }) // only for Key
	// The suite does not close every driver it opens (one handed to a
	// locker.New that fails), so close them all at the end: their go-redis
	// clients would otherwise show up as leaked goroutines.
	var mu sync.Mutex
	var opened []backend.Driver
	t.Cleanup(func() {
		for _, d := range opened {
			_ = d.Close()
		}
	})
	open := func(ctx context.Context, more ...redislock.Option) (backend.Driver, error) {
		d, err := redislock.Open(ctx, url, append(more, opts...)...)
		if err == nil {
			mu.Lock()
			opened = append(opened, d)
			mu.Unlock()
		}
		return d, err
	}
	return conformance.Harness{
		Name:      name,
		NewDriver: func(ctx context.Context) (backend.Driver, error) { return open(ctx) },
		NewFaultyDriver: func(ctx context.Context) (backend.Driver, conformance.Faults, error) {
			fn := conformance.NewFaultNet()
			d, err := open(ctx, redislock.WithDialer(fn.Dial))
			return d, fn, err
		},
		Drop:       func(ctx context.Context, lock string) error { return st.drop(ctx, keyer.Key(lock)) },
		KillServer: st.kill,
		TTL:        suiteTTL,
	}
}

// killAndRestart is a KillServer hook for one server.
func killAndRestart(srv *redisserver.RedisServer) func(ctx context.Context) (func(context.Context) error, error) {
	return func(ctx context.Context) (func(context.Context) error, error) {
		if err := srv.Kill(); err != nil {
			return nil, err
		}
		return srv.Restart, nil
	}
}

// del deletes key on one server.
func del(ctx context.Context, srv *redisserver.RedisServer, key string) error {
	n, err := srv.Do(ctx, "DEL", key)
	if err == nil && n != int64(1) {
		err = errors.New("no such key")
	}
	return err
}

// dropHold deletes the key of c's lock on name in the standalone server,
// behind its holder's back.
func dropHold(t *testing.T, ctx context.Context, c *locker.Client, name string) {
	t.Helper()
	if err := del(ctx, standalone.Get(t), c.Driver().(*redislock.Driver).Key(name)); err != nil {
		t.Fatalf("DEL of %s's key: %v", name, err)
	}
}

// TestConformanceStandalone runs on a server that syncs every write to its
// append-only file, so that the suite may kill and restart it: the locks
// and fencing counters live through the crash.
func TestConformanceStandalone(t *testing.T) {
	srv := persistent.Get(t)
	runSuite(t, "redis", "redis://"+srv.Addr, suite{
		drop: func(ctx context.Context, key string) error { return del(ctx, srv, key) },
		kill: killAndRestart(srv),
	})
}

// TestConformanceBatch: with batch (bounded overtaking across Drivers)
// every contract but FIFO, which the Driver then does not declare.
func TestConformanceBatch(t *testing.T) {
	srv := standalone.Get(t)
	runSuite(t, "redis+batch", standaloneURL(t)+"?batch=4", suite{
		drop: func(ctx context.Context, key string) error { return del(ctx, srv, key) },
	})
}

func TestConformanceCluster(t *testing.T) {
	url := clusterURL(t)
	c := cluster.Get(t)
	runSuite(t, "redis+cluster", url, suite{drop: func(ctx context.Context, key string) error {
		owner, err := c.KeyOwner(ctx, key)
		if err != nil {
			return err
		}
		return del(ctx, owner, key)
	}})
}

func TestConformanceSentinel(t *testing.T) {
	url := sentinelURL(t)
	s := sentinel.Get(t)
	runSuite(t, "redis+sentinel", url, suite{drop: func(ctx context.Context, key string) error {
		m, err := s.Master(ctx)
		if err != nil {
			return err
		}
		return del(ctx, m, key)
	}})
}

// TestConformanceRedLock may kill one instance of three: a majority keeps
// every lock, and the restarted instance, empty, gives no second owner a
// majority.
func TestConformanceRedLock(t *testing.T) {
	url := redlockURL(t)
	rs := instances.Get(t)
	runSuite(t, "redlock", url, suite{
		drop: func(ctx context.Context, key string) error {
			var errs []error
			for _, r := range rs {
				errs = append(errs, del(ctx, r, key))
			}
			return errors.Join(errs...)
		},
		kill: killAndRestart(rs[0]),
	})
}
