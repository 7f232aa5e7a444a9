package mysqllock_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/golocker/locker"
	"github.com/golocker/locker/mysqllock"
)

// TestQueriesUnderContention measures what waiting costs the database, in
// statements counted by a GORM callback, for docs/drivers/sql.md. It
// asserts only loose bounds: performance goals live in benchmarks.
//
//   - waiting: one owner holds a lock for 2s while 8 others wait for it;
//   - contention: 8 owners take and release one lock in a loop for 2s.
func TestQueriesUnderContention(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			db := newDatabase(t, dialect)
			gdb, _ := openGORM(t, db, "")
			var stmts atomic.Int64
			count := func(*gorm.DB) { stmts.Add(1) }
			_ = gdb.Callback().Raw().Before("gorm:raw").Register("test:count", count)
			_ = gdb.Callback().Row().Before("gorm:row").Register("test:count", count)
			ctx := testCtx(t, time.Minute)
			const waiters = 8
			newClient := func() *locker.Client {
				d, err := mysqllock.New(gdb)
				if err != nil {
					t.Fatal(err)
				}
				c, _ := locker.New(d, locker.WithTTL(10*time.Second))
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
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
			before, start := stmts.Load(), time.Now()
			time.Sleep(2 * time.Second)
			waitRate := float64(stmts.Load()-before) / time.Since(start).Seconds()
			released := time.Now()
			_ = holder.Unlock(ctx)
			first := <-got
			wg.Wait()
			drained := time.Since(released)

			before, start = stmts.Load(), time.Now()
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
			n := stmts.Load() - before
			acq := acquisitions.Load()
			summary := fmt.Sprintf("%s: waiting: %.0f statements/s for %d waiters (%.1f per waiter per second); first waiter in %v, all %d in %v; "+
				"contention: %.0f acquisitions/s, %.0f statements/s, %.1f statements per acquisition",
				dialect, waitRate, waiters, waitRate/waiters, first.Sub(released).Round(time.Millisecond), waiters, drained.Round(time.Millisecond),
				float64(acq)/el, float64(n)/el, float64(n)/float64(max(acq, 1)))
			t.Log(summary)
			if waitRate/waiters > 50 {
				t.Errorf("waiting costs %.0f statements per waiter per second; backoff should keep it near 4", waitRate/waiters)
			}
		})
	}
}
