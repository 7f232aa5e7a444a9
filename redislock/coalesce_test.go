package redislock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/redislock"
)

// TestAcquisitionsSharePipelines takes many names at once through one
// Driver: the calls beyond the few in flight on their own share pipelines,
// and every one of them is granted its own lock with a token of its own.
func TestAcquisitionsSharePipelines(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, time.Minute)
	url := standaloneURL(t) + "?pool_size=64"
	d := openAny(t, url).(*redislock.Driver)
	const n, jobs = 4000, 64
	prefix := fmt.Sprintf("share/%d/", time.Now().UnixNano())
	leases := make([]backend.Lease, n)
	var wg sync.WaitGroup
	for j := range jobs {
		wg.Go(func() {
			for i := j; i < n; i += jobs {
				l, err := d.Acquire(ctx, backend.Request{Name: fmt.Sprint(prefix, i), Owner: fmt.Sprint("o", i), TTL: time.Minute})
				if err != nil {
					t.Errorf("Acquire %d: %v", i, err)
					return
				}
				leases[i] = l
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, l := range leases {
		if l.Token() == 0 {
			t.Errorf("lease %d has token 0", i)
		}
		// A second owner must find each lock held.
		if _, err := d.Acquire(ctx, backend.Request{Name: fmt.Sprint(prefix, i), Owner: "other", TTL: time.Minute}); err == nil {
			t.Fatalf("lock %d granted to a second owner", i)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release %d: %v", i, err)
		}
	}
	pipelines, calls := redislock.Pipelines(d)
	t.Logf("%d acquisitions: %d of them in %d pipelines", n, calls, pipelines)
	if pipelines == 0 || calls <= pipelines {
		t.Errorf("%d concurrent acquisitions sent %d calls in %d pipelines, want pipelines carrying more than one call each", n, calls, pipelines)
	}
}

// TestConformancePipelined runs the suite on a Driver that sends every
// acquire script through a pipeline: the path of the calls beyond the few
// in flight on their own, which the other suites take only under load —
// a caller whose ctx ends while its call waits in a pipeline must leave
// nothing behind, as one whose own call was in flight. Not recorded in the
// feature matrix: it is the "redis" column's driver.
func TestConformancePipelined(t *testing.T) {
	srv := standalone.Get(t)
	conformance.Run(t, harness(t, "redis-pipelined", standaloneURL(t), suite{
		drop: func(ctx context.Context, key string) error { return del(ctx, srv, key) },
	}, redislock.WithEveryAcquirePipelined()))
}
