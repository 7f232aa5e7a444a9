package mysqllock

import (
	"context"
	"database/sql"
	"sync/atomic"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// lease is one hold: its Grant, the Driver that renews and releases it,
// and the shared lease that keeps it, if any (D28).
type lease struct {
	driverkit.Grant
	d    *Driver
	on   atomic.Pointer[leaseRef] // nil: the row names no shared lease
	gate *gate                    // the gate the hold keeps (gate.go); nil: none
}

// Renew extends the lease to ttl from the database's now, if the row is
// still this owner's and its lease has not run out. A hold of a Driver
// with shared leases is renewed as a batch of one.
func (l *lease) Renew(ctx context.Context, ttl time.Duration) error {
	d := l.d
	if d.shared != nil {
		items := []backend.RenewItem{{Lease: l, TTL: ttl}}
		d.RenewBatch(ctx, items)
		return items[0].Err
	}
	a := args{"name": l.Name, "owner": l.Owner, "lease_us": leaseMicros(ttl), "lease_id": nil}
	var n int64
	err := d.retryIdempotent(ctx, func() error {
		var err error
		_, n, err = d.exec(ctx, d.db, d.st.renew, a)
		return err
	})
	if err != nil || n == 1 {
		return err
	}
	if d.dialect == DialectMySQL {
		// Matched but unchanged (the same expiry to the millisecond) is
		// a success that MySQL reports as 0 rows.
		var c int64
		err := d.retryIdempotent(ctx, func() error {
			return d.query(ctx, d.db, d.st.renewCheck, a, func(rows *sql.Rows) error { return rows.Scan(&c) })
		})
		if err != nil || c == 1 {
			return err
		}
	}
	return backend.ErrLost
}

// Release frees the row if it is still this owner's and its lease has not
// run out; the row and its fence stay. A hold that came through its gate
// (gate.go) lets the gate go with it, which wakes the next waiter. A
// release that fails retires the hold's shared lease (shared.go).
func (l *lease) Release(ctx context.Context) error {
	d := l.d
	var n int64
	var err error
	if g := l.gate; g != nil {
		var released bool
		released, err = g.release(ctx, l)
		if released {
			n = 1
		}
		g.close(ctx)
	} else {
		err = d.retry(ctx, func() error {
			var err error
			_, n, err = d.exec(ctx, d.db, d.st.release, d.ownerArgs(l.Name, l.Owner))
			return err
		})
	}
	if err != nil {
		// The row may still be held, on a shared lease: let it run out.
		if r := l.on.Load(); r != nil {
			r.sl.die()
		}
		return err
	}
	if n == 0 {
		return backend.ErrLost
	}
	return nil
}
