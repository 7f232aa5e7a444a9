package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/golocker/locker/backend"
)

// Holds implements backend.Inspector: the rows whose name starts with
// prefix, with an owner and a lease that has not run out on the
// database's clock. Expires is the local time at which the remaining lease
// (as the database counts it) runs out.
func (d *Driver) Holds(ctx context.Context, prefix string) ([]backend.Hold, error) {
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	// LIKE's wildcards are escaped with '!' (SQLite compares a substring).
	a := args{"prefix": strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(prefix) + "%"}
	if d.dialect == DialectSQLite {
		a = args{"prefix_len": int64(utf8.RuneCountInString(prefix)), "prefix": prefix}
	}
	var holds []backend.Hold
	err := d.retryIdempotent(ctx, func() error {
		holds = holds[:0]
		now := time.Now()
		return d.query(ctx, d.db, d.st.holds, a, func(rows *sql.Rows) error {
			var h backend.Hold
			var fence, us sql.NullInt64
			if err := rows.Scan(&h.Name, &h.Owner, &fence, &us); err != nil {
				return err
			}
			h.Token = uint64(fence.Int64)
			h.Expires = now.Add(time.Duration(us.Int64) * time.Microsecond)
			holds = append(holds, h)
			return nil
		})
	})
	if err != nil {
		return nil, d.explain(err)
	}
	weighted, err := d.weightedHolds(ctx, a)
	if err != nil {
		return nil, d.explain(err)
	}
	if len(weighted) > 0 {
		holds = append(holds, weighted...)
		slices.SortStableFunc(holds, func(a, b backend.Hold) int { return strings.Compare(a.Name, b.Name) })
	}
	return holds, nil
}

// ForceRelease implements backend.Inspector: it frees name whoever holds
// it (the fence stays), and returns ErrNotHeld if nobody does. A hold on a
// shared lease is counted in the lease, whose Driver then checks its
// holds.
func (d *Driver) ForceRelease(ctx context.Context, name string) error {
	if err := backend.CheckName(name); err != nil {
		return err
	}
	if err := d.ready(ctx); err != nil {
		return err
	}
	var n int64
	a := args{"name": name}
	err := d.retry(ctx, func() error {
		if d.st.forceRevoke == "" {
			var err error
			_, n, err = d.exec(ctx, d.db, d.st.forceRelease, a)
			return err
		}
		// SQLite: the count of the shared lease's forced releases goes up
		// with the release, in one transaction.
		return d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if _, _, err := d.exec(ctx, tx, d.st.forceRevoke, a); err != nil {
				return err
			}
			var err error
			_, n, err = d.exec(ctx, tx, d.st.forceRelease, a)
			return err
		})
	})
	if err != nil {
		return d.explain(err)
	}
	if n == 0 {
		return fmt.Errorf("%w: nobody holds it", backend.ErrNotHeld)
	}
	return nil
}
