package mysqllock

import (
	"context"
	"crypto/rand"
	"database/sql"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// batchRows bounds the rows of one renewal statement: 2 parameters per
// row and one per name, far below every dialect's limit (PostgreSQL 65535,
// SQLite 32766) and a few tens of kilobytes of SQL.
const batchRows = 1000

// RenewBatch implements backend.BatchRenewer: the leases of one length
// are renewed by one statement per batchRows of them, each row
// owner-checked as Renew does. PostgreSQL and SQLite return the renewed
// rows (RETURNING); on MySQL every renewed row gets the batch's random
// stamp, read back by a second statement. A lease whose row was not
// renewed has lost its hold; an error fails only the statement's leases.
func (d *Driver) RenewBatch(ctx context.Context, items []backend.RenewItem) {
	length := func(_ *lease, it backend.RenewItem) int64 { return leaseMicros(it.TTL) }
	driverkit.Batches(items, d, "mysqllock", func(l *lease) *Driver { return l.d }, length, batchRows, func(us int64, idx []int, leases []*lease) {
		d.renewRows(ctx, items, idx, leases, us)
	})
}

// renewRows renews items[idx...], whose leases are leases, to lease us in
// one statement (two on MySQL) and sets their Err.
func (d *Driver) renewRows(ctx context.Context, items []backend.RenewItem, idx []int, leases []*lease, us int64) {
	type key struct{ name, owner string }
	names := make([]any, len(idx))
	pairs := make([]any, len(idx))
	for j, l := range leases {
		names[j], pairs[j] = l.Name, []any{l.Name, l.Owner}
	}
	a := args{"names": names, "pairs": pairs, "lease_us": us}
	renewed := make(map[key]bool, len(idx))
	collect := func(rows *sql.Rows) error {
		var k key
		if err := rows.Scan(&k.name, &k.owner); err != nil {
			return err
		}
		renewed[k] = true
		return nil
	}
	err := d.retryIdempotent(ctx, func() error {
		clear(renewed)
		if d.dialect != DialectMySQL {
			return d.query(ctx, d.st.renewBatch, a, collect)
		}
		stamp := make([]byte, 16)
		_, _ = rand.Read(stamp)
		a["stamp"] = stamp
		if _, _, err := d.exec(ctx, d.db, d.st.renewBatch, a); err != nil {
			return err
		}
		return d.query(ctx, d.st.renewStamped, a, collect)
	})
	for j, i := range idx {
		l := leases[j]
		switch {
		case err != nil:
			items[i].Err = err
		case renewed[key{l.Name, l.Owner}]:
			items[i].Err = nil
		default:
			items[i].Err = backend.ErrLost
		}
	}
}
