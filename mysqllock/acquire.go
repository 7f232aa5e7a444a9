package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// Acquire implements backend.Driver: one attempt, which never waits. It is
// one statement on PostgreSQL (an upsert, which also reads the holder when
// the lock is not free), one or two on SQLite (the upsert, then a read of
// the holder), and on MySQL an update of the lock's row (an insert creates
// it) and a read of the holder when it is held. A held lock is a
// *backend.HeldError naming the holder and its remaining lease.
func (d *Driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if err := checkRequest(r); err != nil {
		return nil, err
	}
	if r.Kind != backend.Mutex {
		return d.acquireWeighted(ctx, r)
	}
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	done, err := d.takeSlot(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	l, err := d.try(ctx, d.db, r)
	if l != nil {
		return l, nil
	}
	return nil, err
}

// state is a lock as acquire returns it or look reads it: whether the row
// exists, its holder ("" when free), fence and remaining lease (the later
// of the hold's own lease and its shared lease; negative when it ran out).
type state struct {
	exists bool
	owner  string
	fence  int64
	left   time.Duration
	// stale is the holder's shared lease when both it and the hold's own
	// lease have run out but the shared lease is still there: nobody can
	// take the lock until it is deleted (lease_kill).
	stale int64
}

// held is the HeldError of an attempt that found s.
func (s state) held() error {
	return &backend.HeldError{Left: max(s.left, 0), Owner: s.owner, Token: uint64(max(s.fence, 0))}
}

// scanState reads a row of {state}: owner, fence, left (µs), lease_id,
// lease_left (µs).
func scanState(rows *sql.Rows, s *state, extra ...any) error {
	var owner sql.NullString
	var fence, leftUs, leaseID, leaseUs sql.NullInt64
	if err := rows.Scan(append(extra, &owner, &fence, &leftUs, &leaseID, &leaseUs)...); err != nil {
		return err
	}
	*s = state{exists: true, owner: owner.String, fence: fence.Int64, left: time.Duration(leftUs.Int64) * time.Microsecond}
	if s.owner != "" && leaseUs.Valid {
		s.left = max(s.left, time.Duration(leaseUs.Int64)*time.Microsecond)
		if s.left < 0 {
			s.stale = leaseID.Int64
		}
	}
	return nil
}

// killStale deletes the shared lease that keeps s from being taken
// although it ran out, if there is one (lease_kill: not if a renewal came
// first).
func (d *Driver) killStale(ctx context.Context, s state) error {
	if s.stale == 0 {
		return nil
	}
	return d.retryIdempotent(ctx, func() error {
		_, _, err := d.exec(ctx, d.db, d.st.leaseKill, args{"lease_id": s.stale})
		return err
	})
}

// look reads name's row without locking it.
func (d *Driver) look(ctx context.Context, name string) (state, error) {
	var s state
	err := d.retryIdempotent(ctx, func() error {
		s = state{}
		return d.query(ctx, d.db, d.st.look, args{"name": name}, func(rows *sql.Rows) error { return scanState(rows, &s) })
	})
	return s, err
}

// try makes one attempt on db (the pool, or a gate's connection). If the
// outcome of a statement is unknown (ctx ended, connection lost), it
// releases by owner before returning the error, so that an error never
// leaves a hold.
func (d *Driver) try(ctx context.Context, db *gorm.DB, r backend.Request) (*lease, error) {
	// A statement cancelled in flight may still commit on the server
	// after a release by owner has looked for it. So the statement gets a
	// short grace after ctx ends, and its outcome is then known: a grant
	// goes back to package locker, which releases it. Only a statement
	// still running after the grace is abandoned, and cleaned up below.
	sctx, stop := graceful(ctx, statementGrace)
	defer stop()
	var l *lease
	var he error
	err := d.retry(sctx, func() error {
		if ctx.Err() != nil {
			return ctx.Err() // no new attempt once ctx has ended
		}
		var err error
		l, he, err = d.attempt(sctx, db, r)
		return err
	})
	switch {
	case err == nil && l != nil:
		return l, nil
	case err == nil:
		return nil, he
	case isTooLong(err):
		return nil, fmt.Errorf("%w: longer than the name column of table %s", backend.ErrInvalidName, d.table)
	}
	if !definite(err) {
		d.cleanup(ctx, r)
	}
	return nil, d.fail(ctx, err)
}

// fail is the error of an attempt that failed with err.
func (d *Driver) fail(ctx context.Context, err error) error {
	if cerr := ended(ctx); ctxErr(err) && cerr != nil {
		return cerr
	}
	return d.explain(err)
}

// attempt sends the acquiring statement on db: a lease, or a HeldError
// (he), or the database's error. A grant has its own lease only (lease_id
// NULL): a hold joins its Driver's shared lease at its first renewal, so
// that a hold that is never renewed (a fixed lease) ends with its own.
func (d *Driver) attempt(ctx context.Context, db *gorm.DB, r backend.Request) (l *lease, he error, err error) {
	a := d.acquireArgs(r)
	for range 3 {
		start := time.Now()
		var s state
		switch d.dialect {
		case DialectMySQL:
			res, n, err := d.exec(ctx, d.quiet(db), d.st.acquire, a)
			if err != nil {
				return nil, nil, err
			}
			if n > 0 {
				return d.mysqlGrant(ctx, r, res, start)
			}
		case DialectPostgres:
			var granted int64
			if err := d.query(ctx, db, d.st.acquire, a, func(rows *sql.Rows) error { return scanState(rows, &s, &granted) }); err != nil {
				return nil, nil, err
			}
			if granted == 1 {
				return d.newLease(r, s.fence, start), nil, nil
			}
		default:
			// SQLite: a read first, which takes no lock of the file in WAL
			// mode: a lock held elsewhere is answered without a write, so
			// that waiters looking at it do not queue their writes behind
			// each other and the holder's release (SQLite serialises
			// writers, and a writer that finds the file locked sleeps).
			if s, err = d.lookOn(ctx, db, r.Name); err != nil {
				return nil, nil, err
			}
			if s.owner != "" && s.left > 0 {
				return nil, s.held(), nil
			}
			start = time.Now()
			s = state{}
			if err := d.query(ctx, db, d.st.acquire, a, func(rows *sql.Rows) error { return scanState(rows, &s) }); err != nil {
				return nil, nil, err
			}
			if s.exists {
				return d.newLease(r, s.fence, start), nil, nil
			}
		}
		if d.dialect != DialectPostgres {
			if s, err = d.lookOn(ctx, db, r.Name); err != nil {
				return nil, nil, err
			}
		}
		if s.stale != 0 {
			if err := d.killStale(ctx, s); err != nil {
				return nil, nil, err
			}
			continue // its holds are free now, unless the lease was renewed
		}
		if s.exists {
			return nil, s.held(), nil
		}
		if d.dialect != DialectMySQL {
			continue // the upsert creates the row: it was created, then removed
		}
		start = time.Now()
		_, _, err = d.exec(ctx, d.quiet(db), d.st.insert, a)
		if err == nil {
			return d.newLease(r, 1, start), nil, nil
		}
		if !isDuplicate(err) {
			return nil, nil, err
		}
		// Another owner created the row first: try the update again.
	}
	return nil, backend.ErrHeld, nil
}

// mysqlGrant is the lease of a MySQL update that took the lock: its fence
// is the reply's insert id.
func (d *Driver) mysqlGrant(ctx context.Context, r backend.Request, res sql.Result, start time.Time) (*lease, error, error) {
	if id := insertID(res); id > 0 {
		return d.newLease(r, id, start), nil, nil
	}
	// A GORM plugin hid the insert id: read the fence back.
	fence, ok, err := d.fenceOf(ctx, r)
	if err == nil && !ok {
		err = errors.New("mysqllock: the fence of a grant is not available")
	}
	if err != nil {
		d.cleanup(ctx, r)
		return nil, nil, err
	}
	return d.newLease(r, fence, start), nil, nil
}

// lookOn reads name's row on db without locking it.
func (d *Driver) lookOn(ctx context.Context, db *gorm.DB, name string) (state, error) {
	var s state
	err := d.query(ctx, db, d.st.look, args{"name": name}, func(rows *sql.Rows) error { return scanState(rows, &s) })
	return s, err
}

// insertID is a MySQL statement's insert id, 0 if unknown.
func insertID(res sql.Result) int64 {
	if res == nil {
		return 0
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0
	}
	return id
}

// fenceOf reads the fence of r's grant, by owner; ok is false when r does
// not hold the lock.
func (d *Driver) fenceOf(ctx context.Context, r backend.Request) (fence int64, ok bool, err error) {
	q := "SELECT fence FROM " + d.quotedTable() + " WHERE name = @name AND owner = @owner"
	err = d.query(ctx, d.db, q, args{"name": r.Name, "owner": r.Owner}, func(rows *sql.Rows) error {
		ok = true
		return rows.Scan(&fence)
	})
	return fence, ok, err
}

// statementGrace is how long a statement in flight may run on after the
// caller's ctx ends, so that its outcome is known.
const statementGrace = time.Second

// graceful returns a context that ends grace after ctx does.
func graceful(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var mu sync.Mutex
	var timer *time.Timer
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		timer = time.AfterFunc(grace, cancel)
		mu.Unlock()
	})
	return sctx, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// cleanup releases by owner, whatever the lease, a grant that may have
// happened although the attempt failed (driverkit.Cleanup).
func (d *Driver) cleanup(ctx context.Context, r backend.Request) {
	driverkit.Cleanup(ctx, d.life, func(ctx context.Context) { d.releaseAny(ctx, r) })
}

func (d *Driver) releaseAny(ctx context.Context, r backend.Request) {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	_ = d.retry(ctx, func() error {
		_, _, err := d.exec(ctx, d.db, d.st.releaseAny, d.ownerArgs(r.Name, r.Owner))
		return err
	})
}

// ownerArgs are the parameters of release and release_any.
func (d *Driver) ownerArgs(name, owner string) args {
	return args{"name": name, "owner": owner}
}

func (d *Driver) newLease(r backend.Request, fence int64, start time.Time) *lease {
	return &lease{Grant: driverkit.GrantOf(r, fence, start), d: d}
}
