package mysqllock

import (
	"context"
	"time"

	"github.com/golocker/locker/backend"
)

// lease is one hold: the row of name with owner set to owner.
type lease struct {
	d           *Driver
	name, owner string
	token       uint64
	start       time.Time
}

// Token returns the row's fence after this grant.
func (l *lease) Token() uint64 { return l.token }

// Start returns when the granting statement was sent.
func (l *lease) Start() time.Time { return l.start }

// Lost returns nil: a SQL database does not tell a client that its row
// changed; the next renewal finds out.
func (l *lease) Lost() <-chan struct{} { return nil }

// Renew extends the lease to ttl from the database's now, if the row is
// still this owner's and its lease has not run out.
func (l *lease) Renew(ctx context.Context, ttl time.Duration) error {
	d := l.d
	var n int64
	err := d.retryIdempotent(ctx, func() error {
		var err error
		_, n, err = d.exec(ctx, d.db, d.st.renew, leaseMicros(ttl), l.name, l.owner)
		return err
	})
	if err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	if d.dialect == DialectMySQL {
		// Matched but unchanged (the same expiry to the millisecond) is
		// a success that MySQL reports as 0 rows.
		var c int64
		err := d.retryIdempotent(ctx, func() error {
			var err error
			c, _, err = d.queryInt(ctx, d.st.renewCheck, l.name, l.owner)
			return err
		})
		if err != nil {
			return err
		}
		if c == 1 {
			return nil
		}
	}
	return backend.ErrLost
}

// Release frees the row if it is still this owner's and its lease has not
// run out; the row and its fence stay. On PostgreSQL the same statement
// notifies the waiters.
func (l *lease) Release(ctx context.Context) error {
	d := l.d
	var n int64
	err := d.retry(ctx, func() error {
		var err error
		_, n, err = d.exec(ctx, d.db, d.st.release, d.releaseArgs(l.name, l.owner)...)
		return err
	})
	if err != nil {
		return err
	}
	d.waiting.poke(l.name) // this Driver's next waiter tries at once
	if n == 0 {
		return backend.ErrLost
	}
	return nil
}
