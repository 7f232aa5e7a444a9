package mysqllock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/golocker/locker/backend"
)

// Waiting polls, with capped exponential backoff and jitter.
const (
	minBackoff = 2 * time.Millisecond
	maxBackoff = 250 * time.Millisecond
	// notifyFallback caps a wait for a NOTIFY: a holder that crashed sends
	// none (the wait is also capped by its remaining lease), and one sent
	// while the LISTEN connection was being re-established is lost.
	notifyFallback = time.Second
)

// unknown is the remaining lease when it was not read.
const unknown = time.Duration(-1)

// Acquire implements backend.Driver. One attempt is one statement on
// PostgreSQL and SQLite (an upsert), and one on MySQL when the row exists.
// A waiting Acquire then reads the holder's remaining lease (a plain
// SELECT, no row lock) and sleeps with backoff, never past that lease,
// and tries again when the lock looks free; on PostgreSQL a release's
// NOTIFY ends the sleep.
func (d *Driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if err := checkRequest(r); err != nil {
		return nil, err
	}
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	var released <-chan struct{} // a release by this Driver
	if r.Wait {
		// Only the head of the Driver's queue for the name polls (see
		// queues).
		q, e := d.waiting.join(r.Name)
		defer d.waiting.leave(r.Name, q, e)
		if err := d.awaitTurn(ctx, e); err != nil {
			return nil, err
		}
		released = e.Value.(*place).wake
	}
	var sub *subscription
	if r.Wait && d.notifier != nil {
		sub = d.notifier.subscribe(ctx, r.Name)
		defer sub.cancel()
	}
	b := backoff{next: minBackoff}
	for {
		l, rem, err := d.try(ctx, r)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, backend.ErrHeld) || !r.Wait {
			return nil, err
		}
		if err := d.waitFree(ctx, r.Name, rem, &b, sub, released); err != nil {
			return nil, err
		}
	}
}

// try makes one attempt. When the lock is held it returns ErrHeld and, if
// it read it, the holder's remaining lease (else unknown). If the outcome
// of a statement is unknown (ctx ended, connection lost), it releases by
// owner before returning the error, so that an error never leaves a hold.
func (d *Driver) try(ctx context.Context, r backend.Request) (*lease, time.Duration, error) {
	var l *lease
	rem := unknown
	// A statement cancelled in flight may still commit on the server
	// after a release by owner has looked for it. So the statement gets a
	// short grace after ctx ends, and its outcome is then known: a grant
	// goes back to package locker, which releases it. Only a statement
	// still running after the grace is abandoned, and cleaned up below.
	sctx, stop := graceful(ctx, statementGrace)
	defer stop()
	err := d.retry(sctx, func() error {
		if ctx.Err() != nil {
			return ctx.Err() // no new attempt once ctx has ended
		}
		var err error
		if d.dialect == DialectMySQL {
			l, rem, err = d.tryMySQL(sctx, r)
		} else {
			l, err = d.tryUpsert(sctx, r)
		}
		return err
	})
	switch {
	case err == nil, errors.Is(err, backend.ErrHeld):
		return l, rem, err
	case isTooLong(err):
		return nil, rem, fmt.Errorf("%w: longer than the name column of table %s", backend.ErrInvalidName, d.table)
	}
	if !definite(err) {
		d.cleanup(ctx, r)
	}
	if ctxErr(err) && ctx.Err() != nil {
		return nil, rem, ctx.Err()
	}
	return nil, rem, d.explain(err)
}

// tryUpsert is one attempt on PostgreSQL or SQLite: the upsert returns the
// new fence, or no row when the lock is held.
func (d *Driver) tryUpsert(ctx context.Context, r backend.Request) (*lease, error) {
	start := time.Now()
	fence, ok, err := d.queryInt(ctx, d.st.acquire, r.Name, r.Owner, leaseMicros(r.TTL))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, backend.ErrHeld
	}
	return d.newLease(r, fence, start), nil
}

// tryMySQL is one attempt on MySQL, which has no UPDATE … RETURNING: take
// the existing row (the fence comes back as the insert id); if nothing
// changed, read the row: held, free again (try again), or absent (insert
// it held). A duplicate key on that insert means another owner created
// the row first: look again.
func (d *Driver) tryMySQL(ctx context.Context, r backend.Request) (*lease, time.Duration, error) {
	us := leaseMicros(r.TTL)
	for range 3 {
		start := time.Now()
		res, n, err := d.exec(ctx, d.db, d.st.acquire, r.Owner, us, r.Name)
		if err != nil {
			return nil, unknown, err
		}
		if n == 1 {
			fence, err := d.mysqlFence(ctx, res, r)
			if err != nil {
				// Granted, but the token is unknown: give it back.
				d.cleanup(ctx, r)
				return nil, unknown, err
			}
			return d.newLease(r, fence, start), unknown, nil
		}
		rem, exists, err := d.remaining(ctx, r.Name)
		if err != nil {
			return nil, unknown, err
		}
		if exists && rem > 0 {
			return nil, rem, backend.ErrHeld
		}
		if exists {
			continue // freed or expired since the update: take it
		}
		start = time.Now()
		_, _, err = d.exec(ctx, d.quietDB, d.st.insert, r.Name, r.Owner, us)
		if err == nil {
			return d.newLease(r, 1, start), unknown, nil
		}
		if !isDuplicate(err) {
			return nil, unknown, err
		}
	}
	return nil, unknown, backend.ErrHeld
}

// mysqlFence returns the fence that the acquiring UPDATE set with
// LAST_INSERT_ID(fence + 1), or reads it back by owner when a GORM plugin
// hid the statement's result.
func (d *Driver) mysqlFence(ctx context.Context, res interface{ LastInsertId() (int64, error) }, r backend.Request) (int64, error) {
	if res != nil {
		if id, err := res.LastInsertId(); err == nil && id > 0 {
			return id, nil
		}
	}
	q := "SELECT fence FROM " + d.quotedTable() + " WHERE name = ? AND owner = ?"
	fence, ok, err := d.queryInt(ctx, q, r.Name, r.Owner)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, errNoResult
	}
	return fence, nil
}

func (d *Driver) quotedTable() string {
	q, _ := quoteTable(d.dialect, d.table) // validated in newDriver
	return q
}

// remaining reads the holder's remaining lease: exists is false when there
// is no row; rem <= 0 when the lock looks free.
func (d *Driver) remaining(ctx context.Context, name string) (rem time.Duration, exists bool, err error) {
	var us int64
	err = d.retryIdempotent(ctx, func() error {
		var err error
		us, exists, err = d.queryInt(ctx, d.st.remaining, name)
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return time.Duration(us) * time.Microsecond, exists, nil
}

// waitFree waits until the lock on name may be free: the holder's lease
// has run out, a NOTIFY came, this Driver released it, or the backoff says
// to look again. rem is
// the holder's remaining lease if the last attempt read it.
func (d *Driver) waitFree(ctx context.Context, name string, rem time.Duration, b *backoff, sub *subscription, released <-chan struct{}) error {
	for {
		if rem == unknown {
			var exists bool
			var err error
			rem, exists, err = d.remaining(ctx, name)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return d.explain(err)
			}
			if !exists {
				return nil
			}
		}
		if rem <= 0 {
			return nil
		}
		sleep := b.step()
		var woken <-chan struct{}
		if sub.active() {
			// A release wakes us; the backoff only guards against a
			// notification lost while the listener reconnected.
			sleep, woken = notifyFallback, sub.ch
		}
		// Never past the holder's lease: a crashed holder sends nothing.
		sleep = min(sleep, rem+time.Millisecond)
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-d.closed:
			t.Stop()
			return backend.ErrClosed
		case <-woken:
			t.Stop()
			return nil
		case <-released:
			t.Stop()
			return nil
		case <-t.C:
		}
		rem = unknown
	}
}

// backoff is capped exponential backoff with jitter: each step is drawn
// from [next/2, next], and next doubles up to maxBackoff.
type backoff struct{ next time.Duration }

func (b *backoff) step() time.Duration {
	d := b.next/2 + rand.N(b.next/2+1)
	b.next = min(2*b.next, maxBackoff)
	return d
}

// statementGrace is how long a statement in flight may run on after the
// caller's ctx ends, so that its outcome is known.
const statementGrace = time.Second

// graceful returns a context that ends grace after ctx does (or at once
// when ctx has no more time to give).
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

// cleanupAgain are the delays after which cleanup looks again, in the
// background, for a grant whose statement ran only after the first look
// (a statement abandoned on a cancelled ctx still runs on the server).
var cleanupAgain = []time.Duration{100 * time.Millisecond, time.Second}

// cleanup releases by owner, whatever the lease, a grant that may have
// happened although the attempt failed: at once with its own short
// deadline (ctx may be the cancelled one), and again in the background
// until Close. The owner is unique to the failed attempt, so a late
// release can free nothing else.
func (d *Driver) cleanup(ctx context.Context, r backend.Request) {
	d.releaseAny(context.WithoutCancel(ctx), r)
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		for _, after := range cleanupAgain {
			t := time.NewTimer(after)
			select {
			case <-t.C:
			case <-d.closed:
				t.Stop()
				return
			}
			d.releaseAny(context.Background(), r)
		}
	}()
}

func (d *Driver) releaseAny(ctx context.Context, r backend.Request) {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	_ = d.retry(ctx, func() error {
		_, _, err := d.exec(ctx, d.db, d.st.releaseAny, d.releaseArgs(r.Name, r.Owner)...)
		return err
	})
}

// releaseArgs are the parameters of release and release_any: PostgreSQL's
// also name the NOTIFY channel.
func (d *Driver) releaseArgs(name, owner string) []any {
	if d.dialect == DialectPostgres {
		return []any{name, owner, d.channel}
	}
	return []any{name, owner}
}

func (d *Driver) newLease(r backend.Request, fence int64, start time.Time) *lease {
	return &lease{d: d, name: r.Name, owner: r.Owner, token: uint64(fence), start: start}
}
