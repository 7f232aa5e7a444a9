package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
	"github.com/golocker/locker/internal/ticket"
)

// Acquire implements backend.Driver: one attempt, which never waits. It is
// one statement on PostgreSQL and SQLite (an upsert), and on MySQL when the
// lock's row exists (an update; an insert creates it). A held lock is a
// *backend.HeldError. The first attempt of a waiting acquisition (r.Since
// set) that does not get the lock takes a ticket in the lock's queue
// (fair.go); its later attempts read the row first, and try only when the
// lock is free and it is their turn. The HeldError's Left then also says
// when to look again.
func (d *Driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if err := checkRequest(r); err != nil {
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
	wait := !r.Since.IsZero()
	var t *ticket.Turn
	if wait {
		t = d.turns.Get(r.Name, r.Owner)
	}
	needTicket := wait && t == nil
	if t != nil {
		if left := d.turns.NotYet(t); left > 0 {
			return nil, &backend.HeldError{Left: left}
		}
	}
	// A waiter reads first, and tries when its turn has come; the head
	// and the next one try at once (tryBlind).
	if t != nil && !d.turns.TryBlind(t) {
		s, err := d.look(ctx, r.Name)
		if err == nil {
			err = d.killStale(ctx, s)
		}
		if err != nil {
			return nil, d.fail(ctx, err)
		}
		if s.Exists && !s.WorthTrying(t.Ticket) {
			return nil, d.held(s, t)
		}
		needTicket = !s.Exists || t.Ticket < s.Serving || t.Ticket > s.Tickets
	}
	l, err := d.try(ctx, r, t, needTicket)
	if l != nil {
		d.turns.Forget(r.Name, r.Owner)
		return l, nil
	}
	return nil, err
}

// state is a lock as acquire returns it or look reads it. Left is the
// later of the hold's own lease and its shared lease.
type state struct {
	ticket.State
	// stale is the holder's shared lease when both it and the hold's own
	// lease have run out but the shared lease is still there: nobody can
	// take the lock until it is deleted (lease_kill).
	stale int64
}

func scanState(rows *sql.Rows, s *state) error {
	var owner sql.NullString
	var fence, leftUs, tickets, serving, lapsed, ageUs, leaseID, leaseUs sql.NullInt64
	if err := rows.Scan(&owner, &fence, &leftUs, &tickets, &serving, &lapsed, &ageUs, &leaseID, &leaseUs); err != nil {
		return err
	}
	*s = state{State: ticket.State{Exists: true, Owner: owner.String, Fence: fence.Int64, Left: time.Duration(leftUs.Int64) * time.Microsecond,
		Tickets: tickets.Int64, Serving: serving.Int64, Lapsed: lapsed.Int64 != 0, Age: time.Duration(ageUs.Int64) * time.Microsecond}}
	if s.Owner != "" && leaseUs.Valid {
		s.Left = max(s.Left, time.Duration(leaseUs.Int64)*time.Microsecond)
		if s.Left < 0 {
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
		return d.query(ctx, d.st.look, args{"name": name, "window_us": claimWindow.Microseconds()},
			func(rows *sql.Rows) error { return scanState(rows, &s) })
	})
	return s, err
}

// held returns the HeldError of an attempt that found s. For a waiter with
// a ticket, Left is also bounded by when it should look again.
func (d *Driver) held(s state, t *ticket.Turn) error {
	return d.turns.Held(s.State, t, d.notifier.listening())
}

// try makes one attempt. If the outcome of a statement is unknown (ctx
// ended, connection lost), it releases by owner before returning the
// error, so that an error never leaves a hold.
func (d *Driver) try(ctx context.Context, r backend.Request, t *ticket.Turn, needTicket bool) (*lease, error) {
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
		l, he, err = d.attempt(sctx, r, t, needTicket)
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
	if ctxErr(err) && ctx.Err() != nil {
		return ctx.Err()
	}
	return d.explain(err)
}

// attempt sends the acquiring statement and, for a waiter that did not
// get the lock and needs one, takes a ticket: a lease, or a HeldError
// (he), or the database's error. A grant has its own lease only (lease_id
// NULL): a hold joins its Driver's shared lease at its first renewal, so
// that a hold that is never renewed (a fixed lease) ends with its own.
func (d *Driver) attempt(ctx context.Context, r backend.Request, t *ticket.Turn, needTicket bool) (l *lease, he error, err error) {
	var ticket, wait int64
	if t != nil && !needTicket {
		ticket = t.Ticket
	}
	if !r.Since.IsZero() {
		wait = 1
	}
	a := args{"name": r.Name, "owner": r.Owner, "lease_us": leaseMicros(r.TTL), "ticket": ticket,
		"wait": wait, "window_us": claimWindow.Microseconds(), "lease_id": nil}
	for range 3 {
		start := time.Now()
		if d.dialect == DialectMySQL {
			res, n, err := d.exec(ctx, d.quietDB, d.st.acquire, a)
			if err != nil {
				return nil, nil, err
			}
			if n > 0 {
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
		} else {
			var s state
			if err := d.query(ctx, d.st.acquire, a, func(rows *sql.Rows) error { return scanState(rows, &s) }); err != nil {
				return nil, nil, err
			}
			if s.Exists {
				return d.newLease(r, s.Fence, start), nil, nil
			}
		}
		if needTicket {
			t, s, err := d.takeTicket(ctx, r)
			if err == nil {
				err = d.killStale(ctx, s) // the waiter's next look tries
			}
			switch {
			case err != nil:
				return nil, nil, err
			case s.Exists && s.Serving == 0:
				return nil, &backend.HeldError{}, nil // MySQL: not read
			case s.Exists:
				return nil, d.held(s, t), nil
			}
		}
		if t != nil && !needTicket && d.turns.TryBlind(t) {
			return nil, d.turns.HeadHeld(t, d.notifier.listening()), nil
		}
		s, err := d.look(ctx, r.Name)
		if err != nil {
			return nil, nil, err
		}
		if s.stale != 0 {
			if err := d.killStale(ctx, s); err != nil {
				return nil, nil, err
			}
			continue // its holds are free now, unless the lease was renewed
		}
		if s.Exists {
			return nil, d.held(s, t), nil
		}
		if d.dialect != DialectMySQL {
			continue // the upsert creates the row: it was created, then removed
		}
		start = time.Now()
		_, _, err = d.exec(ctx, d.quietDB, d.st.insert, a)
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

// takeTicket gives r the next ticket of its lock's queue and returns the
// row after it; s.exists is false when there is no row (MySQL).
func (d *Driver) takeTicket(ctx context.Context, r backend.Request) (t *ticket.Turn, s state, err error) {
	a := args{"name": r.Name, "window_us": claimWindow.Microseconds()}
	if d.dialect != DialectMySQL {
		err = d.query(ctx, d.st.takeTicket, a, func(rows *sql.Rows) error { return scanState(rows, &s) })
		if err != nil || !s.Exists {
			return nil, s, err
		}
		return d.turns.Record(r.Name, r.Owner, s.Tickets), s, nil
	}
	res, n, err := d.exec(ctx, d.db, d.st.takeTicket, a)
	if err != nil || n == 0 {
		return nil, s, err
	}
	if id := insertID(res); id > 0 {
		t = d.turns.Record(r.Name, r.Owner, id)
	}
	// The rank is unknown until the waiter's next look, a few ms away
	// (the back-off starts small): a look now would be one more statement.
	return t, state{State: ticket.State{Exists: true}}, nil
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
	err = d.query(ctx, q, args{"name": r.Name, "owner": r.Owner}, func(rows *sql.Rows) error {
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

// ownerArgs are the parameters of release and release_any: PostgreSQL's
// also name the NOTIFY channel.
func (d *Driver) ownerArgs(name, owner string) args {
	return args{"name": name, "owner": owner, "channel": d.channel}
}

func (d *Driver) newLease(r backend.Request, fence int64, start time.Time) *lease {
	return &lease{Grant: driverkit.GrantOf(r, fence, start), d: d}
}
