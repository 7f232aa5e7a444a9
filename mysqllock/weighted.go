package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// The weighted kinds (semaphores, read-write locks, elections) keep their
// holds in the table of weighted holds (sql/weighted.sql): a head row per
// name, with its limit and a counter that numbers tokens and places, and
// a row per hold and per place of a polled wait. An attempt is one
// transaction that locks the head row, deletes what ran out, reads the
// name's rows and decides by the rule of backend.Kind: granted when no
// place is ahead of the owner's and the weight fits. Waiters poll
// (package locker's back-off); a place keeps their order.

// checkWeighted checks a weighted request's units and value.
func checkWeighted(r backend.Request) error {
	if r.Limit < 1 || r.Limit > backend.MaxLimit || r.Weight < 1 || r.Weight > r.Limit {
		return fmt.Errorf("%w: weight %d of limit %d", backend.ErrInvalidOption, r.Weight, r.Limit)
	}
	if len(r.Value) > backend.MaxValueLen {
		return fmt.Errorf("%w: a value of %d bytes (at most %d)", backend.ErrInvalidOption, len(r.Value), backend.MaxValueLen)
	}
	return nil
}

// wrow is a row of a weighted name as w_rows reads it.
type wrow struct {
	owner         string
	weight, lim   int64
	token, queued int64
	left          time.Duration
}

// acquireWeighted makes one attempt for a weighted request (Acquire's
// rules: an error leaves nothing held or queued for r.Owner).
func (d *Driver) acquireWeighted(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if err := checkWeighted(r); err != nil {
		return nil, err
	}
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	done, err := d.takeSlot(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	// As try: the transaction gets a grace after ctx ends, so that its
	// outcome is known; only one still running after it is cleaned up.
	sctx, stop := graceful(ctx, statementGrace)
	defer stop()
	var l *wlease
	var he error
	err = d.retry(sctx, func() error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var err error
		l, he, err = d.weightedAttempt(sctx, r)
		return err
	})
	switch {
	case err == nil && l != nil:
		return l, nil
	case err == nil:
		return nil, he
	case isTooLong(err):
		return nil, fmt.Errorf("%w: longer than the name column of table %s", backend.ErrInvalidName, weightedTable(d.table))
	}
	if !definite(err) {
		driverkit.Cleanup(ctx, d.life, func(ctx context.Context) { d.releaseWeighted(ctx, r.Kind, r.Name, r.Owner) })
	}
	return nil, d.fail(ctx, err)
}

// weightedAttempt is the transaction of one attempt.
func (d *Driver) weightedAttempt(ctx context.Context, r backend.Request) (l *wlease, he error, err error) {
	a := args{
		"kind": int64(r.Kind), "name": r.Name, "owner": r.Owner, "lim": r.Limit, "weight": r.Weight,
		"lease_ms": leaseMs(r.TTL), "val": []byte(r.Value),
	}
	err = d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		l, he = nil, nil
		if _, _, err := d.exec(ctx, tx, d.st.w.head, a); err != nil {
			return err
		}
		if _, _, err := d.exec(ctx, tx, d.st.w.prune, a); err != nil {
			return err
		}
		var head, mine *wrow
		var others []wrow
		err := d.query(ctx, tx, d.st.w.rows, a, func(rows *sql.Rows) error {
			var w wrow
			var leftMs int64
			var val []byte
			if err := rows.Scan(&w.owner, &w.weight, &w.lim, &w.token, &w.queued, &leftMs, &val); err != nil {
				return err
			}
			w.left = time.Duration(leftMs) * time.Millisecond
			switch w.owner {
			case "":
				head = &w
			case r.Owner:
				mine = &w
			default:
				others = append(others, w)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if head == nil {
			return fmt.Errorf("mysqllock: the head row of %s %q is missing", r.Kind, r.Name)
		}
		if (len(others) > 0 || mine != nil) && head.lim != r.Limit {
			he = fmt.Errorf("%w: %s %q has a limit of %d, the request %d", backend.ErrLimitConflict, r.Kind, r.Name, head.lim, r.Limit)
			return nil
		}
		var used int64
		ahead := false
		for _, w := range others {
			if w.queued == 0 {
				used += w.weight
			} else if mine == nil || mine.queued == 0 || w.token < mine.token {
				ahead = true
			}
		}
		// A hold of r.Owner is an earlier attempt's whose outcome was
		// unknown: not this attempt's grant (its clean-up releases it).
		stale := mine != nil && mine.queued == 0
		a["token"] = head.token + 1
		if !stale && !ahead && used+r.Weight <= r.Limit {
			a["queued"] = int64(0)
			start := time.Now()
			q := d.st.w.insert
			if mine != nil {
				q = d.st.w.grantPlace
			}
			if _, _, err := d.exec(ctx, tx, q, a); err != nil {
				return err
			}
			if _, _, err := d.exec(ctx, tx, d.st.w.setHead, a); err != nil {
				return err
			}
			l = &wlease{Grant: driverkit.GrantOf(r, head.token+1, start), d: d, kind: r.Kind}
			return nil
		}
		he = heldWeighted(others)
		switch {
		case !r.Queue || stale:
		case mine != nil:
			_, _, err = d.exec(ctx, tx, d.st.w.keepPlace, a)
		default:
			a["queued"] = int64(1)
			if _, _, err = d.exec(ctx, tx, d.st.w.insert, a); err == nil {
				_, _, err = d.exec(ctx, tx, d.st.w.setHead, a)
			}
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return l, he, nil
}

// heldWeighted is the HeldError of an attempt that found the holds of
// others: the lease that ends first, and the holder when there is one.
func heldWeighted(others []wrow) error {
	he := &backend.HeldError{}
	n := 0
	for _, w := range others {
		if w.queued != 0 {
			continue
		}
		if n == 0 || w.left < he.Left {
			he.Left = max(w.left, time.Millisecond)
		}
		if n++; n == 1 {
			he.Owner, he.Token = w.owner, uint64(w.token)
		} else {
			he.Owner, he.Token = "", 0
		}
	}
	return he
}

// releaseWeighted deletes the hold or place of owner, whatever its lease.
func (d *Driver) releaseWeighted(ctx context.Context, kind backend.Kind, name, owner string) {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	_ = d.retry(ctx, func() error {
		_, _, err := d.exec(ctx, d.db, d.st.w.releaseAny, args{"kind": int64(kind), "name": name, "owner": owner})
		return err
	})
}

// Dequeue implements backend.Dequeuer: it deletes r.Owner's place in the
// queue of r.Name.
func (d *Driver) Dequeue(ctx context.Context, r backend.Request) error {
	if err := d.ready(ctx); err != nil {
		return err
	}
	return d.retry(ctx, func() error {
		_, _, err := d.exec(ctx, d.db, d.st.w.dequeue, args{"kind": int64(r.Kind), "name": r.Name, "owner": r.Owner})
		return err
	})
}

// leaseMs is a lease in whole milliseconds, rounded up.
func leaseMs(ttl time.Duration) int64 {
	return int64(max((ttl+time.Millisecond-1)/time.Millisecond, 1))
}

// wlease is a weighted hold.
type wlease struct {
	driverkit.Grant
	d    *Driver
	kind backend.Kind
}

var (
	_ backend.Downgrader = (*wlease)(nil)
	_ backend.Proclaimer = (*wlease)(nil)
)

func (l *wlease) args() args {
	return args{"kind": int64(l.kind), "name": l.Name, "owner": l.Owner}
}

// change runs an owner-checked statement on the hold: ErrLost when it
// matched no live hold of the owner.
func (l *wlease) change(ctx context.Context, q string, a args, idempotent bool) error {
	var n int64
	f := func() error {
		var err error
		_, n, err = l.d.exec(ctx, l.d.db, q, a)
		return err
	}
	var err error
	if idempotent {
		err = l.d.retryIdempotent(ctx, f)
	} else {
		err = l.d.retry(ctx, f)
	}
	switch {
	case err != nil:
		return err
	case n == 0:
		return backend.ErrLost
	}
	return nil
}

// Renew extends the hold's lease to ttl from the database's now.
func (l *wlease) Renew(ctx context.Context, ttl time.Duration) error {
	a := l.args()
	a["lease_ms"] = leaseMs(ttl)
	return l.change(ctx, l.d.st.w.renew, a, true)
}

// Release deletes the hold's row, if its lease has not run out.
func (l *wlease) Release(ctx context.Context) error {
	return l.change(ctx, l.d.st.w.release, l.args(), false)
}

// Downgrade implements backend.Downgrader: the hold's row keeps its token
// and lease with the lower weight; the waiters that now fit see it at
// their next attempt.
func (l *wlease) Downgrade(ctx context.Context, weight int64) error {
	a := l.args()
	a["weight"] = weight
	return l.change(ctx, l.d.st.w.downgrade, a, true)
}

// Proclaim implements backend.Proclaimer.
func (l *wlease) Proclaim(ctx context.Context, value string) error {
	if len(value) > backend.MaxValueLen {
		return fmt.Errorf("%w: a value of %d bytes (at most %d)", backend.ErrInvalidOption, len(value), backend.MaxValueLen)
	}
	a := l.args()
	a["val"] = []byte(value)
	return l.change(ctx, l.d.st.w.proclaim, a, true)
}

// weightedHolds lists the weighted holds whose names match a (Holds'
// prefix arguments).
func (d *Driver) weightedHolds(ctx context.Context, a args) ([]backend.Hold, error) {
	var holds []backend.Hold
	err := d.retryIdempotent(ctx, func() error {
		holds = holds[:0]
		now := time.Now()
		return d.query(ctx, d.db, d.st.w.holds, a, func(rows *sql.Rows) error {
			var h backend.Hold
			var kind, token, leftMs int64
			var val []byte
			if err := rows.Scan(&kind, &h.Name, &h.Owner, &token, &h.Weight, &h.Limit, &val, &leftMs); err != nil {
				return err
			}
			h.Kind, h.Token, h.Value = backend.Kind(kind), uint64(token), string(val)
			h.Expires = now.Add(time.Duration(leftMs) * time.Millisecond)
			holds = append(holds, h)
			return nil
		})
	})
	return holds, err
}
