package drivertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golocker/locker"
)

// Load is what MeasureLoad found, in the commands (or statements) its
// count counts.
type Load struct {
	Waiters     int
	WaitRate    float64       // commands per second while the waiters waited
	FirstWaiter time.Duration // from the release to the first waiter's grant
	AllWaiters  time.Duration // from the release to the last waiter's release
	Acquired    float64       // acquisitions per second under contention
	Contended   float64       // commands per second under contention
	PerAcquire  float64       // commands per acquisition under contention
}

// PerWaiter is the commands per waiter per second while they waited.
func (l Load) PerWaiter() float64 { return l.WaitRate / float64(l.Waiters) }

// Summary says l in unit ("commands", "statements").
func (l Load) Summary(unit string) string {
	return fmt.Sprintf("waiting: %.0f %s/s for %d waiters (%.1f per waiter per second); first waiter in %v, all %d in %v; "+
		"contention: %.0f acquisitions/s, %.0f %s/s, %.1f %s per acquisition",
		l.WaitRate, unit, l.Waiters, l.PerWaiter(), l.FirstWaiter.Round(time.Millisecond), l.Waiters, l.AllWaiters.Round(time.Millisecond),
		l.Acquired, l.Contended, unit, l.PerAcquire, unit)
}

// MeasureLoad measures what waiting and contention cost a store, for a
// driver's page in docs/drivers; count returns the commands the store has
// been sent so far, and newClient a new Client (as of another process),
// closed when the test ends.
//
//   - waiting: one owner holds a lock for 2s while waiters others wait for it;
//   - contention: waiters owners take and release one lock in a loop for 2s.
func MeasureLoad(t *testing.T, ctx context.Context, waiters int, newClient func() *locker.Client, count func() int64) Load {
	t.Helper()
	l := Load{Waiters: waiters}
	holder := newClient().NewMutex("load/wait")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make(chan time.Time, waiters)
	for range waiters {
		c := newClient()
		wg.Go(func() {
			m := c.NewMutex("load/wait")
			if err := m.Lock(ctx); err != nil {
				t.Error(err)
				return
			}
			got <- time.Now()
			_ = m.Unlock(ctx)
		})
	}
	time.Sleep(300 * time.Millisecond) // let the waiters reach their backoff cap
	before, start := count(), time.Now()
	time.Sleep(2 * time.Second)
	l.WaitRate = float64(count()-before) / time.Since(start).Seconds()
	released := time.Now()
	_ = holder.Unlock(ctx)
	l.FirstWaiter = (<-got).Sub(released)
	wg.Wait()
	l.AllWaiters = time.Since(released)

	before, start = count(), time.Now()
	var acquisitions atomic.Int64
	stop := time.Now().Add(2 * time.Second)
	for range waiters {
		c := newClient()
		wg.Go(func() {
			m := c.NewMutex("load/contended")
			for time.Now().Before(stop) {
				if err := m.Lock(ctx); err != nil {
					t.Error(err)
					return
				}
				acquisitions.Add(1)
				_ = m.Unlock(ctx)
			}
		})
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	n, acq := count()-before, acquisitions.Load()
	l.Acquired, l.Contended, l.PerAcquire = float64(acq)/el, float64(n)/el, float64(n)/float64(max(acq, 1))
	return l
}
