package mysqllock_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/golocker/locker"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver/sqlserver"
	"github.com/golocker/locker/mysqllock"
)

// killConnections ends, from another session, every other session on the
// test's database: the pool's connections of the drivers under test,
// their wait connections among them. It returns how many it ended.
func killConnections(t *testing.T, admin *gorm.DB, dialect, database string) int {
	t.Helper()
	switch dialect {
	case mysqllock.DialectMySQL:
		var ids []int64
		err := admin.Raw("SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()", database).Scan(&ids).Error
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if err := admin.Exec(fmt.Sprintf("KILL %d", id)).Error; err != nil {
				t.Logf("KILL %d: %v", id, err)
			}
		}
		return len(ids)
	default:
		var n int
		err := admin.Raw(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n).Error
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// TestKilledConnections kills the connections of a holder's driver
// (MariaDB's KILL, PostgreSQL's pg_terminate_backend) several times during
// its hold: renewals reconnect, so the hold is neither broken nor leaked,
// nobody else gets the lock meanwhile, and Unlock works.
func TestKilledConnections(t *testing.T) {
	forDialects(t, serverDialects, func(t *testing.T, db *sqlserver.SQLDatabase, _ context.Context) {
		admin, _ := openGORM(t, db, "")
		if sqlDB, err := admin.DB(); err == nil {
			sqlDB.SetMaxOpenConns(1)
		}
		ctx := drivertest.Context(t, 2*time.Minute) // several kills take longer than a minute
		const ttl = time.Second
		holder := client(t, open(t, db.URL), ttl)
		other := client(t, open(t, db.URL), ttl)

		m := locked(t, ctx, holder, "killed")
		// A waiter in another driver, whose gate's connection (waiting
		// in the database's queue) is killed too.
		waited := make(chan error, 1)
		go func() {
			w := other.NewMutex("killed")
			err := w.Lock(ctx)
			// A kill that cuts the waiter's own acquiring statement
			// leaves its outcome unknown: the driver releases by owner
			// and returns the error, and the caller locks again
			// (docs/drivers/sql.md).
			tries := 0
			for ; err != nil && ctx.Err() == nil; tries++ {
				time.Sleep(10 * time.Millisecond) // as a caller backs off before it tries again
				err = w.Lock(ctx)
			}
			t.Logf("the waiter's statement was cut %d times (the sessions were killed while it waited): it locked again", tries)
			if err == nil {
				err = w.Unlock(ctx)
			}
			waited <- err
		}()
		probe := other.NewMutex("killed")
		end := time.Now().Add(4 * ttl)
		kills := 0
		for time.Now().Before(end) {
			kills += killConnections(t, admin, db.Dialect, db.Name)
			if ok, err := probe.TryLock(ctx); ok || err != nil {
				t.Fatalf("TryLock by another client during the hold = %v, %v", ok, err)
			}
			select {
			case <-m.Lost():
				t.Fatal("the hold was lost after its connections were killed")
			case <-time.After(ttl / 4):
			}
		}
		t.Logf("killed %d sessions over %v", kills, 4*ttl)
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Unlock after the kills: %v", err)
		}
		drivertest.Succeeds(t, waited, 30*time.Second, "the waiter's Lock after Unlock")
	})
}

// TestClockIndependence proves that no client time reaches the database:
// every parameter of every statement the driver sends is a name, an owner
// or a lease length (checked with a GORM callback over a full lock life),
// so expiry is decided on the database's clock alone. Clients whose
// sessions use time zones 26 hours apart then exclude each other and see
// the same expiry.
func TestClockIndependence(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		// One session per client, each in its own time zone, 25
		// hours apart (SQLite has no session time zone).
		east, _ := openGORM(t, db, "")
		west, _ := openGORM(t, db, "")
		zones := map[string][2]string{
			mysqllock.DialectMySQL:    {"SET time_zone = '+13:00'", "SET time_zone = '-12:00'"},
			mysqllock.DialectPostgres: {"SET TIME ZONE 'Pacific/Kiritimati'", "SET TIME ZONE 'Etc/GMT+12'"},
		}[db.Dialect]
		for i, g := range []*gorm.DB{east, west} {
			sqlDB, _ := g.DB()
			sqlDB.SetMaxOpenConns(1)
			if zones[i] != "" {
				if err := g.Exec(zones[i]).Error; err != nil {
					t.Fatalf("%s: %v", zones[i], err)
				}
			}
		}
		var bad []string
		check := func(tx *gorm.DB) {
			for _, v := range tx.Statement.Vars {
				switch v := v.(type) {
				case string, nil: // nil: no shared lease
				case int64:
					if v > int64(time.Hour/time.Microsecond) {
						bad = append(bad, fmt.Sprintf("%d in %s", v, tx.Statement.SQL.String()))
					}
				default:
					bad = append(bad, fmt.Sprintf("%T %v in %s", v, v, tx.Statement.SQL.String()))
				}
			}
		}
		for _, g := range []*gorm.DB{east, west} {
			if err := g.Callback().Raw().Before("gorm:raw").Register("test:vars", check); err != nil {
				t.Fatal(err)
			}
			if err := g.Callback().Row().Before("gorm:row").Register("test:vars", check); err != nil {
				t.Fatal(err)
			}
		}
		de, err := mysqllock.New(east)
		if err != nil {
			t.Fatal(err)
		}
		dw, err := mysqllock.New(west)
		if err != nil {
			t.Fatal(err)
		}
		const ttl = 600 * time.Millisecond
		ce, cw := client(t, de, ttl), client(t, dw, ttl)
		a := locked(t, ctx, ce, "tz", locker.WithFixedLease())
		since := time.Now()
		b := cw.NewMutex("tz")
		if ok, err := b.TryLock(ctx); ok || err != nil {
			t.Fatalf("TryLock from the other time zone = %v, %v; want false", ok, err)
		}
		holds, err := cw.Holds(ctx, "tz")
		if err != nil || len(holds) != 1 {
			t.Fatalf("Holds = %v, %v", holds, err)
		}
		if d := time.Until(holds[0].Expires); d <= 0 || d > ttl+time.Second {
			t.Errorf("the other time zone sees the lease end in %v, want within (0, %v]", d, ttl)
		}
		if ok, err := b.LockTimeout(ctx, 10*time.Second); !ok || err != nil {
			t.Fatalf("LockTimeout after the fixed lease = %v, %v", ok, err)
		}
		if got := time.Since(since); got < ttl/2 || got > ttl+5*time.Second {
			t.Errorf("the lease of %v ended for the other time zone after %v", ttl, got)
		}
		if err := b.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		_ = a.Unlock(context.Background())
		if len(bad) > 0 {
			t.Errorf("statements carried values that are not names, owners or lease lengths: %v", bad)
		}
	})
}

// TestDriverLogsGoToTheClientsLogger kills the pooled connections of a
// MySQL driver: go-sql-driver/mysql reports the dead ones it finds
// ("closing bad idle connection"), and those messages reach the Client's
// logger, not stderr.
func TestDriverLogsGoToTheClientsLogger(t *testing.T) {
	db := newDatabase(t, mysqllock.DialectMySQL)
	admin, _ := openGORM(t, db, "")
	ctx := drivertest.Context(t, time.Minute)
	var logged strings.Builder
	var mu sync.Mutex
	h := slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(p)
	}), nil)
	// Nothing may reach stderr meanwhile.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	var leaked []byte
	done := make(chan struct{})
	go func() { leaked, _ = io.ReadAll(r); close(done) }()
	c, err := locker.Open(ctx, db.URL, locker.WithLogger(slog.New(h)))
	if err != nil {
		os.Stderr = stderr
		t.Fatal(err)
	}
	// Several idle connections, then every one of them killed.
	var wg sync.WaitGroup
	for i := range 4 {
		m := c.NewMutex(fmt.Sprint("logs/", i))
		wg.Go(func() {
			if err := m.Lock(ctx); err == nil {
				_ = m.Unlock(ctx)
			}
		})
	}
	wg.Wait()
	killConnections(t, admin, mysqllock.DialectMySQL, db.Name)
	time.Sleep(100 * time.Millisecond) // let the kills land
	for i := range 4 {
		m := c.NewMutex(fmt.Sprint("logs/", i))
		if err := m.Lock(ctx); err != nil {
			t.Errorf("Lock after the kills: %v", err)
			continue
		}
		_ = m.Unlock(ctx)
	}
	_ = c.Close()
	os.Stderr = stderr
	w.Close()
	<-done
	if len(leaked) > 0 {
		t.Errorf("written to stderr: %q", leaked)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), "mysql driver") {
		t.Errorf("the Client's logger got no message from the MySQL driver; it got %q", logged.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestABurstOfAcquisitionsLeavesRenewalsAConnection holds a lock with a
// 1 s lease on a pool of three connections whose every reply comes 20 ms
// late, while 48 goroutines take and release other locks for 3 s: the
// pool is never idle, and database/sql hands a freed connection to any
// one of the calls waiting. Acquisitions leave one connection to the
// rest (slots.go), so the watchdog's renewals keep the hold; without the
// reserve, a renewal waited behind the acquisitions past its lease.
func TestABurstOfAcquisitionsLeavesRenewalsAConnection(t *testing.T) {
	forDialects(t, serverDialects, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		fn := conformance.NewFaultNet()
		sep := "?"
		if strings.Contains(db.URL, "?") {
			sep = "&"
		}
		c := client(t, open(t, db.URL+sep+"max_conns=3", mysqllock.WithDialer(fn.Dial)), time.Second)
		kept := locked(t, ctx, c, "kept")
		fn.SetDelay(20 * time.Millisecond)
		end := time.Now().Add(3 * time.Second)
		var taken atomic.Int64
		var wg sync.WaitGroup
		for i := range 48 {
			m := c.NewMutex(fmt.Sprint("burst/", i))
			wg.Go(func() {
				for time.Now().Before(end) && ctx.Err() == nil {
					ok, err := m.TryLock(ctx)
					if err != nil {
						t.Errorf("TryLock: %v", err)
						return
					}
					if ok {
						taken.Add(1)
						if err := m.Unlock(ctx); err != nil {
							t.Errorf("Unlock: %v", err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		fn.SetDelay(0)
		select {
		case <-kept.Lost():
			t.Fatalf("the hold was lost during the burst (%d acquisitions): %v", taken.Load(), kept.Err())
		default:
		}
		if err := kept.Unlock(ctx); err != nil {
			t.Fatalf("Unlock of the kept hold after the burst (%d acquisitions): %v", taken.Load(), err)
		}
		if taken.Load() == 0 {
			t.Fatal("no acquisition during the burst")
		}
		t.Logf("%d acquisitions in the burst; the hold was kept", taken.Load())
	})
}
