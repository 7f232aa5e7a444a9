package mysqllock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/testserver/sqlserver"
	"github.com/golocker/locker/mysqllock"
)

// nowPlus is dialect's now, as the driver stores times, plus secs
// seconds (negative: before).
func nowPlus(dialect string, secs int) string {
	switch dialect {
	case mysqllock.DialectMySQL:
		return fmt.Sprintf("UTC_TIMESTAMP(3) + INTERVAL %d SECOND", secs)
	case mysqllock.DialectPostgres:
		return fmt.Sprintf("statement_timestamp() + INTERVAL '%d seconds'", secs)
	}
	return fmt.Sprintf("CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) + %d", secs*1000)
}

// sharedDriver returns a Driver with shared leases on db through GORM,
// and the count of statements it sent.
func sharedDriver(t *testing.T, db *sqlserver.SQLDatabase) (*mysqllock.Driver, *gorm.DB, *atomic.Int64) {
	t.Helper()
	gdb, _ := openGORM(t, db, "")
	var stmts atomic.Int64
	count := func(*gorm.DB) { stmts.Add(1) }
	for _, err := range []error{
		gdb.Callback().Raw().Before("gorm:raw").Register("test:count", count),
		gdb.Callback().Row().Before("gorm:row").Register("test:count", count),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	d, err := mysqllock.New(gdb, mysqllock.WithSharedLease(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, gdb, &stmts
}

// run runs q on g or fails t.
func run(t *testing.T, g *gorm.DB, q string, a ...any) int64 {
	t.Helper()
	tx := g.Exec(q, a...)
	if tx.Error != nil {
		t.Fatalf("%s: %v", q, tx.Error)
	}
	return tx.RowsAffected
}

// joined renews items once, as the watchdog's first renewal does, which
// puts the holds on their Driver's shared lease, or fails t.
func joined(t *testing.T, ctx context.Context, d *mysqllock.Driver, items []backend.RenewItem) {
	t.Helper()
	d.RenewBatch(ctx, items)
	for i, it := range items {
		if it.Err != nil {
			t.Fatalf("first renewal of item %d: %v", i, it.Err)
		}
	}
}

// runScript runs each statement of script (DDL's output) or fails t.
func runScript(t *testing.T, g *gorm.DB, script string) {
	t.Helper()
	for _, stmt := range strings.Split(script, ";\n") {
		if strings.TrimSpace(stmt) != "" {
			run(t, g, stmt)
		}
	}
}

// count returns the result of a SELECT COUNT(*).
func count(t *testing.T, g *gorm.DB, q string, a ...any) int64 {
	t.Helper()
	var n int64
	if err := g.Raw(q, a...).Scan(&n).Error; err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestASharedLeaseRenewsEveryHoldInOneStatement: 300 holds on a shared
// lease are renewed by one statement on PostgreSQL and SQLite, two on
// MySQL, and every hold then lasts the renewed length, although the rows'
// own leases were not written.
func TestASharedLeaseRenewsEveryHoldInOneStatement(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		d, gdb, stmts := sharedDriver(t, db)
		const n = 300
		items := make([]backend.RenewItem, n)
		for i := range items {
			l, err := d.Acquire(ctx, backend.Request{Name: fmt.Sprint("many/", i), Owner: "o", TTL: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			items[i] = backend.RenewItem{Lease: l, TTL: 20 * time.Second}
		}
		joined(t, ctx, d, items)
		// The rows' own leases end now: only the shared one keeps them.
		run(t, gdb, "UPDATE golocker_locks SET expires_at = "+nowPlus(db.Dialect, -1))
		before := stmts.Load()
		d.RenewBatch(ctx, items)
		sent := stmts.Load() - before
		for i, it := range items {
			if it.Err != nil {
				t.Fatalf("item %d: %v", i, it.Err)
			}
		}
		if want := map[bool]int64{true: 2, false: 1}[db.Dialect == mysqllock.DialectMySQL]; sent != want {
			t.Errorf("RenewBatch of %d holds sent %d statements, want %d", n, sent, want)
		}
		holds, err := open(t, db.URL).Holds(ctx, "many/")
		if err != nil || len(holds) != n {
			t.Fatalf("another Driver's Holds = %d holds, %v; want %d", len(holds), err, n)
		}
		for _, h := range holds {
			if left := time.Until(h.Expires); left < 10*time.Second || left > 21*time.Second {
				t.Fatalf("%s: %v left after a renewal to 20s", h.Name, left)
			}
		}
		for _, it := range items {
			if err := it.Lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestAHoldOnASharedLeaseEndsWithIt: a hold whose own lease ran out is
// kept by its shared lease from another Driver's attempts and listed by
// Holds; once the shared lease ran out too, the other Driver takes the
// lock (deleting the lease that ran out) and the first one's renewal
// finds the hold lost.
func TestAHoldOnASharedLeaseEndsWithIt(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		d, gdb, _ := sharedDriver(t, db)
		other := open(t, db.URL)
		l, err := d.Acquire(ctx, backend.Request{Name: "kept", Owner: "first", TTL: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		items := []backend.RenewItem{{Lease: l, TTL: 20 * time.Second}}
		joined(t, ctx, d, items)
		run(t, gdb, "UPDATE golocker_locks SET expires_at = "+nowPlus(db.Dialect, -1)+" WHERE name = 'kept'")
		req := backend.Request{Name: "kept", Owner: "second", TTL: 20 * time.Second}
		if l2, err := other.Acquire(ctx, req); !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("another Driver's Acquire while the shared lease lasts = %v, %v; want ErrHeld", l2, err)
		}
		if holds, err := other.Holds(ctx, "kept"); err != nil || len(holds) != 1 || time.Until(holds[0].Expires) < 10*time.Second {
			t.Fatalf("Holds while the shared lease lasts = %v, %v", holds, err)
		}
		if d.RenewBatch(ctx, items); items[0].Err != nil {
			t.Fatalf("renewal while the shared lease lasts: %v", items[0].Err)
		}

		// The holder stalled: its shared lease ran out.
		run(t, gdb, "UPDATE golocker_locks_leases SET expires_at = "+nowPlus(db.Dialect, -1))
		if holds, err := other.Holds(ctx, "kept"); err != nil || len(holds) != 0 {
			t.Fatalf("Holds after the shared lease ran out = %v, %v; want none", holds, err)
		}
		l2, err := other.Acquire(ctx, req)
		if err != nil {
			t.Fatalf("Acquire after the shared lease ran out: %v", err)
		}
		if l2.Token() <= l.Token() {
			t.Errorf("token %d after %d", l2.Token(), l.Token())
		}
		if n := count(t, gdb, "SELECT COUNT(*) FROM golocker_locks_leases"); n != 0 {
			t.Errorf("%d shared leases left after the one that ran out was taken from", n)
		}
		if d.RenewBatch(ctx, items); !errors.Is(items[0].Err, backend.ErrLost) {
			t.Errorf("the first holder's renewal after the lock was taken = %v, want ErrLost", items[0].Err)
		}
		if err := l.Release(ctx); !errors.Is(err, backend.ErrLost) {
			t.Errorf("the first holder's Release = %v, want ErrLost", err)
		}
		if err := l2.Release(ctx); err != nil {
			t.Errorf("the second holder's Release: %v", err)
		}
	})
}

// TestAHoldOutlivesItsSharedLeaseOnItsOwn: when a shared lease ran out
// while a hold's own lease still runs, the renewal renews the hold's row
// and moves it to a new shared lease, which keeps it from then on.
func TestAHoldOutlivesItsSharedLeaseOnItsOwn(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		d, gdb, _ := sharedDriver(t, db)
		l, err := d.Acquire(ctx, backend.Request{Name: "moves", Owner: "o", TTL: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		leaseOf := func() int64 { return count(t, gdb, "SELECT lease_id FROM golocker_locks WHERE name = 'moves'") }
		items := []backend.RenewItem{{Lease: l, TTL: 20 * time.Second}}
		joined(t, ctx, d, items)
		first := leaseOf()
		if first == 0 {
			t.Fatal("the first renewal did not put the hold on a shared lease")
		}
		run(t, gdb, "UPDATE golocker_locks_leases SET expires_at = "+nowPlus(db.Dialect, -1))
		if d.RenewBatch(ctx, items); items[0].Err != nil {
			t.Fatalf("renewal of a hold whose own lease runs: %v", items[0].Err)
		}
		second := leaseOf()
		if second == first || second == 0 {
			t.Fatalf("the hold's shared lease went from %d to %d, want a new one", first, second)
		}
		if n := count(t, gdb, "SELECT COUNT(*) FROM golocker_locks_leases WHERE id = ?", second); n != 1 {
			t.Fatalf("the new shared lease %d is not in the table", second)
		}
		// From now on the new shared lease keeps it.
		run(t, gdb, "UPDATE golocker_locks SET expires_at = "+nowPlus(db.Dialect, -1))
		if d.RenewBatch(ctx, items); items[0].Err != nil {
			t.Fatalf("renewal on the new shared lease: %v", items[0].Err)
		}
		if _, err := open(t, db.URL).Acquire(ctx, backend.Request{Name: "moves", Owner: "x", TTL: time.Second}); !errors.Is(err, backend.ErrHeld) {
			t.Errorf("another Driver's Acquire = %v, want ErrHeld", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestAForcedReleaseOfASharedHoldIsLost: the shared lease is renewed, but
// the hold forced off by another Driver comes back lost, the others
// renewed, at this renewal and the next.
func TestAForcedReleaseOfASharedHoldIsLost(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		d, _, _ := sharedDriver(t, db)
		var items []backend.RenewItem
		for i := range 4 {
			l, err := d.Acquire(ctx, backend.Request{Name: fmt.Sprint("forced/", i), Owner: "o", TTL: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, backend.RenewItem{Lease: l, TTL: 20 * time.Second})
		}
		joined(t, ctx, d, items)
		if err := open(t, db.URL).ForceRelease(ctx, "forced/1"); err != nil {
			t.Fatal(err)
		}
		// The renewal that sees the count change does not carry the
		// forced-off hold: the later ones that do still check.
		first := items[:1]
		if d.RenewBatch(ctx, first); first[0].Err != nil {
			t.Fatalf("renewal of a hold that was not forced off: %v", first[0].Err)
		}
		for round := range 2 {
			d.RenewBatch(ctx, items)
			for i, it := range items {
				if want := i == 1; errors.Is(it.Err, backend.ErrLost) != want || (!want && it.Err != nil) {
					t.Errorf("round %d, item %d: Err = %v", round, i, it.Err)
				}
			}
		}
	})
}

// TestADriverWithoutSharedLeasesClearsTheLeaseOfARow: a Driver without
// the option that takes a lock a shared Driver held writes lease_id NULL,
// so its hold ends with its own lease, not with the other Driver's shared
// lease.
func TestADriverWithoutSharedLeasesClearsTheLeaseOfARow(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		d, gdb, _ := sharedDriver(t, db)
		l, err := d.Acquire(ctx, backend.Request{Name: "mixed", Owner: "shared", TTL: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		joined(t, ctx, d, []backend.RenewItem{{Lease: l, TTL: 20 * time.Second}})
		leased := "SELECT COUNT(*) FROM golocker_locks WHERE name = 'mixed' AND lease_id IS NOT NULL"
		if n := count(t, gdb, leased); n != 1 {
			t.Fatalf("the shared Driver's row has no lease_id")
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		plain := open(t, db.URL)
		l2, err := plain.Acquire(ctx, backend.Request{Name: "mixed", Owner: "plain", TTL: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if n := count(t, gdb, leased); n != 0 {
			t.Errorf("the plain Driver's hold kept the shared lease of the row")
		}
		// Its own lease ran out: the lock is free although the shared
		// Driver's lease runs.
		run(t, gdb, "UPDATE golocker_locks SET expires_at = "+nowPlus(db.Dialect, -1)+" WHERE name = 'mixed'")
		l3, err := d.Acquire(ctx, backend.Request{Name: "mixed", Owner: "shared", TTL: 20 * time.Second})
		if err != nil {
			t.Fatalf("Acquire after the plain hold's own lease ran out: %v", err)
		}
		if err := l2.Release(ctx); !errors.Is(err, backend.ErrLost) {
			t.Errorf("the plain holder's Release = %v, want ErrLost", err)
		}
		if err := l3.Release(ctx); err != nil {
			t.Error(err)
		}
	})
}

// TestATableOfAnEarlierVersionGetsTheLeaseColumn: a lock table without
// lease_id (as the previous version made it) gets the column on first
// use, and without create_table the error names it.
func TestATableOfAnEarlierVersionGetsTheLeaseColumn(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		gdb, _ := openGORM(t, db, "")
		ddl, err := mysqllock.DDL(db.Dialect, "old")
		if err != nil {
			t.Fatal(err)
		}
		runScript(t, gdb, ddl)
		run(t, gdb, "ALTER TABLE old DROP COLUMN lease_id")
		req := backend.Request{Name: "x", Owner: "o", TTL: time.Second}
		_, err = open(t, db.URL+sep(db.URL)+"table=old&create_table=false").Acquire(ctx, req)
		if err == nil || !strings.Contains(err.Error(), "lacks a column") {
			t.Fatalf("Acquire on the old table without create_table = %v, want an error naming the missing column", err)
		}
		run(t, gdb, "ALTER TABLE old ADD COLUMN lease_id BIGINT")
		run(t, gdb, "DROP TABLE old_leases")
		_, err = open(t, db.URL+sep(db.URL)+"table=old&create_table=false").Acquire(ctx, req)
		if err == nil || !strings.Contains(err.Error(), "table old_leases does not exist") {
			t.Fatalf("Acquire without the leases table nor create_table = %v, want an error naming the table", err)
		}
		run(t, gdb, "ALTER TABLE old DROP COLUMN lease_id")
		for _, shared := range []string{"false", "true"} {
			l, err := open(t, db.URL+sep(db.URL)+"table=old&shared_lease="+shared).Acquire(ctx, req)
			if err != nil {
				t.Fatalf("shared_lease=%s: Acquire on the old table: %v", shared, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// sep is what joins a query parameter to url.
func sep(url string) string {
	if strings.Contains(url, "?") {
		return "&"
	}
	return "?"
}

// TestAHoldThatIsNotRenewedEndsWithItsOwnLease: a hold of a shared Driver
// that is never renewed (a fixed lease) does not ride on the shared lease
// that the Driver renews for its other holds.
func TestAHoldThatIsNotRenewedEndsWithItsOwnLease(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		d, gdb, _ := sharedDriver(t, db)
		fixed, err := d.Acquire(ctx, backend.Request{Name: "fixed", Owner: "o", TTL: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		kept, err := d.Acquire(ctx, backend.Request{Name: "kept", Owner: "o", TTL: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		items := []backend.RenewItem{{Lease: kept, TTL: 20 * time.Second}}
		joined(t, ctx, d, items)
		joined(t, ctx, d, items)
		run(t, gdb, "UPDATE golocker_locks SET expires_at = "+nowPlus(db.Dialect, -1))
		other := open(t, db.URL)
		if _, err := other.Acquire(ctx, backend.Request{Name: "kept", Owner: "x", TTL: time.Second}); !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("Acquire of the renewed hold = %v, want ErrHeld", err)
		}
		if _, err := other.Acquire(ctx, backend.Request{Name: "fixed", Owner: "x", TTL: time.Second}); err != nil {
			t.Fatalf("Acquire of the hold that was never renewed, after its own lease: %v", err)
		}
		if err := fixed.Release(ctx); !errors.Is(err, backend.ErrLost) {
			t.Errorf("Release of the fixed hold = %v, want ErrLost", err)
		}
	})
}

// TestAFailedReleaseRetiresTheSharedLease: a release that fails may have
// left its row held, on the shared lease: the Driver renews that lease no
// more, its other holds move to a new one, and the row left behind ends
// with the old one.
func TestAFailedReleaseRetiresTheSharedLease(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		d, gdb, _ := sharedDriver(t, db)
		var items []backend.RenewItem
		for _, name := range []string{"orphan", "other"} {
			l, err := d.Acquire(ctx, backend.Request{Name: name, Owner: "o", TTL: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, backend.RenewItem{Lease: l, TTL: 20 * time.Second})
		}
		joined(t, ctx, d, items)
		leaseOf := func(name string) int64 {
			return count(t, gdb, "SELECT lease_id FROM golocker_locks WHERE name = ?", name)
		}
		old := leaseOf("orphan")
		done, cancel := context.WithCancel(ctx)
		cancel()
		if err := items[0].Lease.Release(done); err == nil {
			t.Fatal("Release with a ctx that ended succeeded")
		}
		rest := items[1:]
		joined(t, ctx, d, rest)
		if moved := leaseOf("other"); moved == old || moved == 0 {
			t.Fatalf("the other hold stayed on shared lease %d after a failed release (now %d)", old, moved)
		}
		// The old lease was not renewed: once it runs out, the row left
		// behind is free.
		run(t, gdb, "UPDATE golocker_locks SET expires_at = "+nowPlus(db.Dialect, -1))
		run(t, gdb, "UPDATE golocker_locks_leases SET expires_at = "+nowPlus(db.Dialect, -1)+" WHERE id = ?", old)
		other := open(t, db.URL)
		if _, err := other.Acquire(ctx, backend.Request{Name: "orphan", Owner: "x", TTL: time.Second}); err != nil {
			t.Fatalf("Acquire of the row left behind: %v", err)
		}
		if _, err := other.Acquire(ctx, backend.Request{Name: "other", Owner: "x", TTL: time.Second}); !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("Acquire of the hold on the new shared lease = %v, want ErrHeld", err)
		}
	})
}

// TestASharedLeaseIsNotRenewedPastItsEnd: once a shared lease could have
// run out as its Driver counts it, the Driver does not renew it, even if
// the database still has it (a renewal whose answer was lost): a hold it
// kept is renewed by its row, while the database still counts it, and
// moves to a new shared lease; the old one is left to run out.
func TestASharedLeaseIsNotRenewedPastItsEnd(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		d, gdb, _ := sharedDriver(t, db)
		// The lease must outlast a grant and its first renewal: ten times
		// what they take here, at least half a second.
		began := time.Now()
		w, err := d.Acquire(ctx, backend.Request{Name: "warm", Owner: "w", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		joined(t, ctx, d, []backend.RenewItem{{Lease: w, TTL: time.Minute}})
		ttl := max(500*time.Millisecond, 10*time.Since(began))
		l, err := d.Acquire(ctx, backend.Request{Name: "late", Owner: "o", TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		items := []backend.RenewItem{{Lease: l, TTL: ttl}}
		joined(t, ctx, d, items)
		// The lease ends, as the Driver counts it, within ttl of now.
		deadline := time.Now().Add(ttl)
		old := count(t, gdb, "SELECT lease_id FROM golocker_locks WHERE name = 'late'")
		run(t, gdb, "UPDATE golocker_locks_leases SET expires_at = "+nowPlus(db.Dialect, 60))
		time.Sleep(time.Until(deadline)) // a local deadline, not a guess
		run(t, gdb, "UPDATE golocker_locks SET expires_at = "+nowPlus(db.Dialect, -1))
		if d.RenewBatch(ctx, items); items[0].Err != nil {
			t.Fatalf("renewal of a hold the database still counts: %v", items[0].Err)
		}
		if now := count(t, gdb, "SELECT lease_id FROM golocker_locks WHERE name = 'late'"); now == old {
			t.Errorf("the hold stayed on shared lease %d after its end", old)
		}
		later := nowPlus(db.Dialect, 30)
		if n := count(t, gdb, "SELECT COUNT(*) FROM golocker_locks_leases WHERE id = ? AND expires_at > "+later, old); n != 1 {
			t.Errorf("the shared lease %d was renewed after its end", old)
		}
	})
}

// TestAFailedReleaseAfterAFailedMoveRetiresTheSharedLease: a hold whose
// first renewal failed may name the shared lease it was moving to; a
// failed release then retires that lease too.
func TestAFailedReleaseAfterAFailedMoveRetiresTheSharedLease(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		d, gdb, _ := sharedDriver(t, db)
		kept, err := d.Acquire(ctx, backend.Request{Name: "kept", Owner: "o", TTL: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		keptItems := []backend.RenewItem{{Lease: kept, TTL: 20 * time.Second}}
		joined(t, ctx, d, keptItems)
		shared := count(t, gdb, "SELECT lease_id FROM golocker_locks WHERE name = 'kept'")
		moving, err := d.Acquire(ctx, backend.Request{Name: "moving", Owner: "o", TTL: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		items := []backend.RenewItem{{Lease: moving, TTL: 20 * time.Second}}
		if d.RenewBatch(done, items); items[0].Err == nil {
			t.Fatal("a renewal with a ctx that ended succeeded")
		}
		if err := moving.Release(done); err == nil {
			t.Fatal("a release with a ctx that ended succeeded")
		}
		joined(t, ctx, d, keptItems)
		if now := count(t, gdb, "SELECT lease_id FROM golocker_locks WHERE name = 'kept'"); now == shared {
			t.Errorf("the other hold stayed on shared lease %d, which the failed hold may name", shared)
		}
	})
}
