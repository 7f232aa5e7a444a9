package redislock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/matrix"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/redislock"
)

// suiteTTL is the short lease of the suite's expiry checks.
const suiteTTL = time.Second

// runSuite runs the conformance suite on the drivers that url opens, with
// drop deleting a lock key behind its owner's back, and records the report
// for the feature matrix under name.
func runSuite(t *testing.T, name, url string, drop func(ctx context.Context, key string) error) {
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
	rep := conformance.Run(t, conformance.Harness{
		Name: name,
		NewDriver: func(ctx context.Context) (backend.Driver, error) {
			d, err := redislock.Open(ctx, url)
			if err == nil {
				mu.Lock()
				opened = append(opened, d)
				mu.Unlock()
			}
			return d, err
		},
		Drop: func(ctx context.Context, lock string) error { return drop(ctx, keyer.Key(lock)) },
		TTL:  suiteTTL,
	})
	matrix.Record(t, rep)
}

// del deletes key on one server.
func del(ctx context.Context, srv *testserver.RedisServer, key string) error {
	n, err := srv.Do(ctx, "DEL", key)
	if err == nil && n != int64(1) {
		err = errors.New("no such key")
	}
	return err
}

func TestConformanceStandalone(t *testing.T) {
	url := standaloneURL(t)
	srv := standalone.Get(t)
	runSuite(t, "redis", url, func(ctx context.Context, key string) error { return del(ctx, srv, key) })
}

// TestConformanceBatch: with batch (bounded overtaking across Drivers)
// every contract but FIFO, which the Driver then does not declare.
func TestConformanceBatch(t *testing.T) {
	srv := standalone.Get(t)
	runSuite(t, "redis+batch", standaloneURL(t)+"?batch=4", func(ctx context.Context, key string) error { return del(ctx, srv, key) })
}

func TestConformanceCluster(t *testing.T) {
	url := clusterURL(t)
	c := cluster.Get(t)
	runSuite(t, "redis+cluster", url, func(ctx context.Context, key string) error {
		owner, err := c.KeyOwner(ctx, key)
		if err != nil {
			return err
		}
		return del(ctx, owner, key)
	})
}

func TestConformanceSentinel(t *testing.T) {
	url := sentinelURL(t)
	s := sentinel.Get(t)
	runSuite(t, "redis+sentinel", url, func(ctx context.Context, key string) error {
		m, err := s.Master(ctx)
		if err != nil {
			return err
		}
		return del(ctx, m, key)
	})
}

func TestConformanceRedLock(t *testing.T) {
	url := redlockURL(t)
	rs := instances.Get(t)
	runSuite(t, "redlock", url, func(ctx context.Context, key string) error {
		var errs []error
		for _, r := range rs {
			errs = append(errs, del(ctx, r, key))
		}
		return errors.Join(errs...)
	})
}
