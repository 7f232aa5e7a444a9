package mysqllock_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/mysqllock"
)

// TestConcurrentFirstAcquire has K owners take a name that has no row yet,
// all at once: exactly one wins, the others are told it is held, and no
// duplicate key error reaches them or the application's GORM logger.
func TestConcurrentFirstAcquire(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			const k = 20
			db := newDatabase(t, dialect)
			gdb, rec := openGORM(t, db, "")
			if sqlDB, err := gdb.DB(); err == nil && dialect != mysqllock.DialectSQLite {
				sqlDB.SetMaxOpenConns(k)
				sqlDB.SetMaxIdleConns(k)
			}
			ctx := testCtx(t, time.Minute)
			drivers := make([]*mysqllock.Driver, k)
			for i := range drivers {
				d, err := mysqllock.New(gdb)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = d.Close() })
				drivers[i] = d
			}
			for round := range 5 {
				name := fmt.Sprintf("first/%d", round)
				start := make(chan struct{})
				errs := make([]error, k)
				var wg sync.WaitGroup
				for i, d := range drivers {
					wg.Go(func() {
						<-start
						l, err := d.Acquire(ctx, backend.Request{Name: name, Owner: fmt.Sprintf("o%d", i), TTL: time.Minute})
						if err == nil && l.Token() != 1 {
							err = fmt.Errorf("token %d on a new row, want 1", l.Token())
						}
						errs[i] = err
					})
				}
				close(start)
				wg.Wait()
				wins := 0
				for i, err := range errs {
					switch {
					case err == nil:
						wins++
					case errors.Is(err, backend.ErrHeld):
					default:
						t.Errorf("round %d, owner %d: %v", round, i, err)
					}
				}
				if wins != 1 {
					t.Errorf("round %d: %d winners, want 1", round, wins)
				}
			}
			if dup := rec.errorsContaining("duplicate"); len(dup) > 0 {
				t.Errorf("the application's GORM logger saw %d duplicate key errors, e.g. %v", len(dup), dup[0])
			}
		})
	}
}

// TestUnusualNames stores names that would break SQL built by string
// concatenation, names that differ only in case or trailing space (which
// MySQL's default collations treat as equal), and names at and past the
// column's size.
func TestUnusualNames(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			db := newDatabase(t, dialect)
			d := open(t, db.URL)
			ctx := testCtx(t, time.Minute)
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
}

// TestNarrowColumnIsInvalidName: a table created by hand with a name
// column narrower than the driver's makes a longer name ErrInvalidName,
// not a database error (SQLite does not enforce column sizes).
func TestNarrowColumnIsInvalidName(t *testing.T) {
	for _, dialect := range []string{mysqllock.DialectMySQL, mysqllock.DialectPostgres} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			db := newDatabase(t, dialect)
			gdb, _ := openGORM(t, db, "")
			ddl, err := mysqllock.DDL(dialect, "narrow")
			if err != nil {
				t.Fatal(err)
			}
			ddl = strings.Replace(ddl, "(512)", "(16)", 1)
			if err := gdb.Exec(ddl).Error; err != nil {
				t.Fatalf("%s: %v", ddl, err)
			}
			d, err := mysqllock.New(gdb, mysqllock.WithTable("narrow"), mysqllock.WithCreateTable(false))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			ctx := testCtx(t, time.Minute)
			if _, err := d.Acquire(ctx, backend.Request{Name: strings.Repeat("n", 17), Owner: "o", TTL: time.Minute}); !errors.Is(err, backend.ErrInvalidName) {
				t.Errorf("Acquire of a name longer than the column = %v, want ErrInvalidName", err)
			}
			if _, err := d.Acquire(ctx, backend.Request{Name: strings.Repeat("n", 16), Owner: "o", TTL: time.Minute}); err != nil {
				t.Errorf("Acquire of a name that fits: %v", err)
			}
		})
	}
}

// TestMissingTableWithoutCreate: with create_table=false and no table,
// the error says what to do.
func TestMissingTableWithoutCreate(t *testing.T) {
	db := newDatabase(t, mysqllock.DialectSQLite)
	d := open(t, db.URL+"?create_table=false")
	_, err := d.Acquire(testCtx(t, time.Minute), backend.Request{Name: "n", Owner: "o", TTL: time.Minute})
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
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			db := newDatabase(t, dialect)
			ctx := testCtx(t, time.Minute)
			url := db.URL
			if dialect == mysqllock.DialectPostgres {
				url = "postgresql" + strings.TrimPrefix(url, "postgres")
			}
			c, err := locker.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			m := c.NewMutex("open")
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLocalWaitersAreServedInOrder queues waiters on one Driver one after
// the other and checks that they get the lock in that order, and that the
// queue is gone afterwards. Only the head of a Driver's queue polls; when
// each waiter polled with its own backoff, a waiter that had backed off
// lost to newer ones.
func TestLocalWaitersAreServedInOrder(t *testing.T) {
	for _, dialect := range []string{mysqllock.DialectMySQL, mysqllock.DialectPostgres, mysqllock.DialectSQLite} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, time.Minute)
			d := open(t, newDatabase(t, dialect).URL)
			const name, waiters = "in-order", 6
			h, err := d.Acquire(ctx, backend.Request{Name: name, Owner: "holder", TTL: time.Minute, Wait: true})
			if err != nil {
				t.Fatal(err)
			}
			order := make(chan int, waiters)
			var wg sync.WaitGroup
			defer wg.Wait() // the last Release, before the Driver closes
			for i := range waiters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l, err := d.Acquire(ctx, backend.Request{Name: name, Owner: fmt.Sprint("w", i), TTL: time.Minute, Wait: true})
					if err != nil {
						t.Error(err)
						order <- -1
						return
					}
					order <- i
					if err := l.Release(ctx); err != nil {
						t.Error(err)
					}
				}()
				deadline := time.Now().Add(10 * time.Second)
				for mysqllock.LocalWaiters(d, name) != i+1 {
					if time.Now().After(deadline) {
						t.Fatalf("waiter %d did not queue", i)
					}
					time.Sleep(time.Millisecond)
				}
			}
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
			for want := range waiters {
				select {
				case got := <-order:
					if got != want {
						t.Fatalf("grant %d went to waiter %d, want %d", want, got, want)
					}
				case <-ctx.Done():
					t.Fatal("waiters did not all get the lock")
				}
			}
			if n := mysqllock.LocalWaiters(d, name); n != 0 {
				t.Errorf("%d local waiters left", n)
			}
		})
	}
}
