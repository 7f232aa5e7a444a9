package mysqllock

import (
	"context"
	"crypto/rand"
	"database/sql"
	"slices"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// batchRows bounds the rows of one renewal statement: 2 parameters per
// row and one per name, far below every dialect's limit (PostgreSQL 65535,
// SQLite 32766) and a few tens of kilobytes of SQL.
const batchRows = 1000

// batchKey groups the leases of a RenewBatch call: by length, and by the
// shared lease that keeps them (nil: their rows are renewed).
type batchKey struct {
	us     int64
	shared *sharedLease
}

// RenewBatch implements backend.BatchRenewer: the leases of one length
// are renewed by one statement per batchRows of them, each row
// owner-checked as Renew does. PostgreSQL and SQLite return the renewed
// rows (RETURNING); on MySQL every renewed row gets the batch's random
// stamp, read back by a second statement. A lease whose row was not
// renewed has lost its hold; an error fails only the statement's leases.
// Holds on a shared lease (WithSharedLease) are renewed by one statement
// on the shared lease's row, whatever their number (renewShared).
func (d *Driver) RenewBatch(ctx context.Context, items []backend.RenewItem) {
	if i := slices.IndexFunc(items, isWeighted); i >= 0 {
		// The weighted holds are renewed one by one, the others as a
		// batch.
		var rest []backend.RenewItem
		var at []int
		for i, it := range items {
			if isWeighted(it) {
				items[i].Err = it.Lease.Renew(ctx, it.TTL)
				continue
			}
			rest = append(rest, it)
			at = append(at, i)
		}
		if len(rest) > 0 {
			d.RenewBatch(ctx, rest)
			for j, i := range at {
				items[i].Err = rest[j].Err
			}
		}
		return
	}
	key := func(l *lease, it backend.RenewItem) batchKey {
		k := batchKey{us: leaseMicros(it.TTL)}
		if r := l.on.Load(); r != nil && r.sure && r.sl.us == k.us && !r.sl.isDead() {
			k.shared = r.sl
		}
		return k
	}
	renewed := make(map[*sharedLease]sharedResult)
	driverkit.Batches(items, d, "mysqllock", func(l *lease) *Driver { return l.d }, key, batchRows, func(k batchKey, idx []int, leases []*lease) {
		if k.shared == nil {
			d.renewRows(ctx, items, idx, leases, k.us)
			return
		}
		res, ok := renewed[k.shared]
		if !ok {
			res = d.renewShared(ctx, k.shared)
			renewed[k.shared] = res
		}
		d.renewOnShared(ctx, items, idx, leases, k.shared, res)
	})
}

// renewRows renews items[idx...], whose leases are leases, to lease us in
// one statement (two on MySQL) and sets their Err. With shared leases, the
// rows move to the Driver's current shared lease.
func (d *Driver) renewRows(ctx context.Context, items []backend.RenewItem, idx []int, leases []*lease, us int64) {
	var sl *sharedLease
	if d.shared != nil {
		var err error
		if sl, err = d.currentLease(ctx, time.Duration(us)*time.Microsecond); err != nil {
			for _, i := range idx {
				items[i].Err = err
			}
			return
		}
	}
	type key struct{ name, owner string }
	names := make([]any, len(idx))
	pairs := make([]any, len(idx))
	for j, l := range leases {
		names[j], pairs[j] = l.Name, []any{l.Name, l.Owner}
	}
	a := args{"names": names, "pairs": pairs, "lease_us": us, "lease_id": sl.ref()}
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
			return d.query(ctx, d.db, d.st.renewBatch, a, collect)
		}
		stamp := make([]byte, 16)
		_, _ = rand.Read(stamp)
		a["stamp"] = stamp
		if _, _, err := d.exec(ctx, d.db, d.st.renewBatch, a); err != nil {
			return err
		}
		return d.query(ctx, d.db, d.st.renewStamped, a, collect)
	})
	for j, i := range idx {
		l := leases[j]
		switch {
		case err != nil:
			items[i].Err = err
			// The row may have moved to sl: renew it by its row until a
			// renewal says where it is, and retire sl if its release fails.
			if sl != nil {
				l.on.Store(&sl.refs[0])
			}
		case renewed[key{l.Name, l.Owner}]:
			items[i].Err = nil
			if sl != nil {
				l.on.Store(&sl.refs[1])
			}
		default:
			items[i].Err = backend.ErrLost
		}
	}
}

// isWeighted reports whether it renews a weighted hold (weighted.go).
func isWeighted(it backend.RenewItem) bool {
	_, ok := it.Lease.(*wlease)
	return ok
}
