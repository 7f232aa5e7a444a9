package mysqllock_test

import (
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/drivertest"
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
			ctx := drivertest.Context(t, time.Minute)
			newClient := func() *locker.Client {
				d, err := mysqllock.New(gdb)
				if err != nil {
					t.Fatal(err)
				}
				return client(t, d, 10*time.Second)
			}
			l := drivertest.MeasureLoad(t, ctx, 8, newClient, stmts.Load)
			t.Logf("%s: %s", dialect, l.Summary("statements"))
			if l.PerWaiter() > 50 {
				t.Errorf("waiting costs %.0f statements per waiter per second; backoff should keep it near 4", l.PerWaiter())
			}
		})
	}
}
