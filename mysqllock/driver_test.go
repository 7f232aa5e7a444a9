package mysqllock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver/sqlserver"
	"github.com/golocker/locker/mysqllock"
)

// TestConcurrentFirstAcquire has K owners take a name that has no row yet,
// all at once: exactly one wins, the others are told it is held, and no
// duplicate key error reaches them or the application's GORM logger.
func TestConcurrentFirstAcquire(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		const k = 20
		gdb, rec := openGORM(t, db, "")
		if sqlDB, err := gdb.DB(); err == nil && db.Dialect != mysqllock.DialectSQLite {
			sqlDB.SetMaxOpenConns(k)
			sqlDB.SetMaxIdleConns(k)
		}
		drivers := make([]*mysqllock.Driver, k)
		for i := range drivers {
			d, err := mysqllock.New(gdb)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			drivers[i] = d
		}
		drivertest.FirstAcquireRaces(t, ctx, drivers, func(l backend.Lease) error {
			if l.Token() != 1 {
				return fmt.Errorf("token %d on a new row, want 1", l.Token())
			}
			return nil
		})
		if dup := rec.errorsContaining("duplicate"); len(dup) > 0 {
			t.Errorf("the application's GORM logger saw %d duplicate key errors, e.g. %v", len(dup), dup[0])
		}
	})
}

// TestUnusualNames stores names that would break SQL built by string
// concatenation, names that differ only in case or trailing space (which
// MySQL's default collations treat as equal), and names at and past the
// column's size.
func TestUnusualNames(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		d := open(t, db.URL)
		names := []string{
			`x'); DROP TABLE golocker_locks; --`,
			`x"); DROP TABLE golocker_locks; --`,
			"back\\slash\\", "quote'", `quote"`, "tick`", "semi;colon", "per%cent", "under_score",
			"slash/es/", "ünïcødé-日本-🔒", "Case", "case", "trail", "trail ", "tab\tnew\nline",
			strings.Repeat("é", mysqllock.MaxNameLen/2), // 512 bytes
		}
		for i, n := range names {
			l, err := d.Acquire(ctx, backend.Request{Name: n, Owner: fmt.Sprintf("o%d", i), TTL: time.Minute})
			if err != nil {
				t.Fatalf("Acquire(%.40q): %v", n, err)
			}
			defer l.Release(ctx)
		}
		// Every name is its own lock, still held.
		other := open(t, db.URL)
		for _, n := range names {
			if _, err := other.Acquire(ctx, backend.Request{Name: n, Owner: "other", TTL: time.Minute}); !errors.Is(err, backend.ErrHeld) {
				t.Errorf("Acquire(%.40q) by another owner = %v, want ErrHeld", n, err)
			}
		}
		holds, err := d.Holds(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(holds) != len(names) {
			t.Errorf("Holds lists %d locks, want %d", len(holds), len(names))
		}
		// LIKE's wildcards in a prefix are literal.
		for prefix, want := range map[string]int{"per%": 1, "under_": 1, "%": 0, "_": 0, "x'": 1, "Case": 1, "trail": 2} {
			hs, err := d.Holds(ctx, prefix)
			if err != nil || len(hs) != want {
				t.Errorf("Holds(%q) = %d holds, %v; want %d", prefix, len(hs), err, want)
			}
		}
		long := strings.Repeat("n", mysqllock.MaxNameLen+1)
		if _, err := d.Acquire(ctx, backend.Request{Name: long, Owner: "o", TTL: time.Minute}); !errors.Is(err, backend.ErrInvalidName) {
			t.Errorf("Acquire of a %d-byte name = %v, want ErrInvalidName", len(long), err)
		}
		if _, err := d.Acquire(ctx, backend.Request{Name: "bad\xff", Owner: "o", TTL: time.Minute}); !errors.Is(err, backend.ErrInvalidName) {
			t.Errorf("Acquire of a non-UTF-8 name = %v, want ErrInvalidName", err)
		}
	})
}

// TestNarrowColumnIsInvalidName: a table created by hand with a name
// column narrower than the driver's makes a longer name ErrInvalidName,
// not a database error (SQLite does not enforce column sizes).
func TestNarrowColumnIsInvalidName(t *testing.T) {
	forDialects(t, serverDialects, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		gdb, _ := openGORM(t, db, "")
		ddl, err := mysqllock.DDL(db.Dialect, "narrow")
		if err != nil {
			t.Fatal(err)
		}
		runScript(t, gdb, strings.Replace(ddl, "(512)", "(16)", 1))
		d, err := mysqllock.New(gdb, mysqllock.WithTable("narrow"), mysqllock.WithCreateTable(false))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if _, err := d.Acquire(ctx, backend.Request{Name: strings.Repeat("n", 17), Owner: "o", TTL: time.Minute}); !errors.Is(err, backend.ErrInvalidName) {
			t.Errorf("Acquire of a name longer than the column = %v, want ErrInvalidName", err)
		}
		if _, err := d.Acquire(ctx, backend.Request{Name: strings.Repeat("n", 16), Owner: "o", TTL: time.Minute}); err != nil {
			t.Errorf("Acquire of a name that fits: %v", err)
		}
	})
}

// TestMissingTableWithoutCreate: with create_table=false and no table,
// the error says what to do.
func TestMissingTableWithoutCreate(t *testing.T) {
	db := newDatabase(t, mysqllock.DialectSQLite)
	d := open(t, db.URL+"?create_table=false")
	_, err := d.Acquire(drivertest.Context(t, time.Minute), backend.Request{Name: "n", Owner: "o", TTL: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Acquire without the table = %v, want an error saying it does not exist", err)
	}
}

// TestNewDoesNotCloseTheDB: a Driver built from the application's
// *gorm.DB leaves it open.
func TestNewDoesNotCloseTheDB(t *testing.T) {
	db := newDatabase(t, mysqllock.DialectSQLite)
	gdb, _ := openGORM(t, db, "")
	d, err := mysqllock.New(gdb)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gdb.Exec("SELECT 1").Error; err != nil {
		t.Errorf("the *gorm.DB after the Driver's Close: %v", err)
	}
	tx := gdb.Begin()
	defer tx.Rollback()
	if _, err := mysqllock.New(tx); err == nil {
		t.Error("New on a transaction succeeded; its statements would commit only with it")
	}
}

// TestLockerOpen opens every scheme through locker.Open, as configuration
// would.
func TestLockerOpen(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		url := db.URL
		if db.Dialect == mysqllock.DialectPostgres {
			url = "postgresql" + strings.TrimPrefix(url, "postgres")
		}
		drivertest.LockOnce(t, ctx, url)
	})
}

// TestWaitersAreServedInArrivalOrder: on MySQL and PostgreSQL, waiters of
// separate Clients (as separate processes) queue in the database for the
// lock's gate, and get the lock in the order they began to wait; the owner
// that releases it and locks again at once comes after them.
func TestWaitersAreServedInArrivalOrder(t *testing.T) {
	forDialects(t, serverDialects, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		const name, waiters = "in-order", 5
		admin, _ := openGORM(t, db, "")
		drivertest.ServedInArrivalOrder(t, ctx, db.URL, name, waiters, func() int64 { return gateWaiters(t, admin, db.Dialect) })
	})
}

// gateWaiters counts the sessions waiting for a gate in db, whatever the
// lock: a test's database has the test's only.
func gateWaiters(t *testing.T, admin *gorm.DB, dialect string) int64 {
	t.Helper()
	q := "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
	if dialect == mysqllock.DialectMySQL {
		q = "SELECT count(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND DB = DATABASE()"
	}
	var n int64
	if err := admin.Raw(q).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRenewBatch renews several leases in one call, one of which was
// forced off: that one is lost, the others are renewed, on every
// database.
func TestRenewBatch(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		d := open(t, db.URL)
		var items []backend.RenewItem
		for i := range 5 {
			l, err := d.Acquire(ctx, backend.Request{Name: fmt.Sprint("batch/", i), Owner: fmt.Sprint("o", i), TTL: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(ctx)
			// Two lengths: one statement each.
			items = append(items, backend.RenewItem{Lease: l, TTL: time.Duration(30+i%2) * time.Second})
		}
		if err := d.ForceRelease(ctx, "batch/2"); err != nil {
			t.Fatal(err)
		}
		d.RenewBatch(ctx, items)
		for i, it := range items {
			if want := i == 2; errors.Is(it.Err, backend.ErrLost) != want || (!want && it.Err != nil) {
				t.Errorf("item %d: Err = %v", i, it.Err)
			}
		}
		holds, err := d.Holds(ctx, "batch/")
		if err != nil {
			t.Fatal(err)
		}
		if len(holds) != 4 {
			t.Fatalf("Holds = %v, want 4", holds)
		}
		for _, h := range holds {
			if left := time.Until(h.Expires); left < 20*time.Second {
				t.Errorf("%s: %v left after a renewal to 30s", h.Name, left)
			}
		}
	})
}
