package mysqllock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// Waiting natively. MySQL and PostgreSQL have locks of their own that wait
// in the server, in order, and wake the next waiter the moment they are
// let go: GET_LOCK and pg_advisory_lock, held by a session. Each lock name
// has a gate, such a lock keyed by the table and the name. A waiting
// acquisition (AcquireWait) takes a connection of the pool, waits in the
// database's queue for the gate, and then makes the same attempt on the
// row as Acquire: the row stays the truth of the hold, its lease and its
// token. The hold keeps the gate and its connection until its release,
// which frees the row and lets the gate go — in one statement on
// PostgreSQL — and so wakes the next waiter, which takes the row at once.
// A hand-off on a hot name thus costs what the database's own lock costs,
// plus one statement.
//
// A hold taken without the gate (by TryLock, by a Lock while the Driver had
// no wait connection free, or past a stalled gate as below) does not wake
// anyone: the gate's holder, which waits for the row, looks at it again —
// at once while the lock changes hands, backing off to maxHeadPause, and
// never later than the holder's lease ends.
//
// A stalled process can keep a gate after its lease ran out: its session
// lives on. A waiter blocked on the gate looks at the row when the
// holder's lease should end, and takes the lock without the gate once that
// lease has run out, or once the lock has stayed free for freeGrace while
// the gate stays held; the hand-off is then as slow as a poll's until the
// stalled process lets the gate go.

const (
	// maxHeadPause is the longest the gate's holder waits before it looks
	// again at a row held without the gate.
	maxHeadPause = 250 * time.Millisecond
	// freeGrace is how long a waiter blocked on the gate lets a free lock
	// wait for the gate's holder to take it.
	freeGrace = 250 * time.Millisecond
	// lookSlack is added to a holder's remaining lease before a blocked
	// waiter looks: by then the lease has run out, unless renewed.
	lookSlack = 5 * time.Millisecond
	// cancelWait is how long a waiter whose wait the server was asked to
	// cancel waits for the statement to end before it drops the
	// connection (the server is unreachable).
	cancelWait = 2 * time.Second
	// gateWaitSeconds is the timeout of MySQL's GET_LOCK: a year, as
	// long as the database allows; a wait ends by cancellation.
	gateWaitSeconds = 365 * 24 * 3600
)

// gates is a Driver's budget of wait connections.
type gates struct {
	d     *Driver
	slots chan struct{} // one per gate connection in use
}

func newGates(d *Driver, n int) *gates {
	return &gates{d: d, slots: make(chan struct{}, n)}
}

// gate is one name's gate, waited for or held on a connection of the pool.
type gate struct {
	gs    *gates
	conn  *sql.Conn
	db    *gorm.DB // GORM on conn
	key   any      // the gate's key: int64 (PostgreSQL) or string (MySQL)
	sess  int64    // the server's id of conn's session, to cancel a wait
	held  bool     // the session holds the gate
	maybe bool     // the session may hold the gate: a wait was cancelled
	bad   bool     // conn's state is unknown: drop it, and its session
}

// gateKey is the key of the gate of name in table: a 64-bit advisory lock
// key on PostgreSQL (advisory locks are per database), a user lock name of
// 48 characters on MySQL (user locks are per server, and their names at
// most 64 characters).
func gateKey(dialect, table, name string) any {
	sum := sha256.Sum256([]byte("golocker\x00" + table + "\x00" + name))
	if dialect == DialectPostgres {
		return int64(binary.BigEndian.Uint64(sum[:8]))
	}
	return "golocker:" + hex.EncodeToString(sum[:20])[:39]
}

// AcquireWait implements backend.Waiter on MySQL and PostgreSQL: it waits
// for the gate of r.Name in the database's queue, then takes the row. With
// no wait connection free, or on SQLite, it makes one attempt, as Acquire:
// package locker then waits by attempts.
func (d *Driver) AcquireWait(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if d.gates == nil || r.Kind != backend.Mutex {
		// The weighted kinds wait by polling, in the order of their
		// places.
		return d.Acquire(ctx, r)
	}
	if err := checkRequest(r); err != nil {
		return nil, err
	}
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	select {
	case d.gates.slots <- struct{}{}:
	default:
		return d.Acquire(ctx, r)
	}
	g, err := d.gates.open(ctx, r.Name)
	if err != nil {
		<-d.gates.slots
		return nil, d.fail(ctx, err)
	}
	l, err := g.acquire(ctx, r)
	if l == nil || l.gate == nil {
		g.close(ctx)
	}
	if l != nil {
		return l, nil
	}
	if _, failed := err.(gateFailed); failed && ctx.Err() == nil {
		// The wait's connection failed (a killed session, a cut
		// network) before any attempt on the row whose outcome is
		// unknown: nothing is held, and no release by r.Owner is
		// pending. One attempt instead; package locker then waits and
		// calls again.
		return d.Acquire(ctx, r)
	}
	return nil, err
}

// gateFailed is the error of a native wait whose connection failed with
// err (a killed session, a cut network), after which nothing is held or
// queued for the owner, and no release by the owner is pending: the same
// request may be made again. An attempt on the row whose outcome is
// unknown is released by owner, now and later (driverkit.Cleanup): its
// error is returned as it is, and package locker does not ask again with
// that owner.
type gateFailed struct{ err error }

func (e gateFailed) Error() string { return e.err.Error() }
func (e gateFailed) Unwrap() error { return e.err }

// open takes a connection of the pool for the gate of name.
func (gs *gates) open(ctx context.Context, name string) (*gate, error) {
	d := gs.d
	conn, err := d.sqlDB.Conn(ctx)
	if err != nil {
		return nil, err
	}
	// A Session with a Context has a Statement of its own, whose
	// ConnPool may then be set: the statements of db run on conn.
	db := d.db.Session(&gorm.Session{NewDB: true, Context: context.Background()})
	db.Statement.ConnPool = conn
	return &gate{gs: gs, conn: conn, db: db, key: gateKey(d.dialect, d.table, name)}, nil
}

// acquire takes the gate and then the row, on g's connection: a lease that
// holds the gate, one taken without it, or an error (ErrHeld when the lock
// was taken past a stalled gate by someone else first).
func (g *gate) acquire(ctx context.Context, r backend.Request) (*lease, error) {
	d := g.gs.d
	got, l, s, err := g.first(ctx, r)
	if err != nil {
		return nil, err
	}
	g.held = got
	if l != nil {
		l.gate = g
		return l, nil
	}
	if !got {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		got, l, err = g.wait(ctx, r, s)
		g.held = got
		switch {
		case err != nil:
			return nil, err
		case !got:
			// The gate is held by a process that stalled: take the
			// row without it.
			return d.try(ctx, d.db, r)
		case l != nil:
			if err := d.freshen(ctx, l, r); err != nil {
				return nil, err // released by owner
			}
			l.gate = g
			return l, nil
		}
	}
	return g.head(ctx, r)
}

// first makes a native wait's first attempt, in one statement
// (gate_acquire): it takes the gate if it is free, and then the row if it
// is free too. It reports whether it got the gate, the grant (nil when
// the row was held or missing) and, without a grant, the row as it found
// it. It is not sent again on a deadlock: a session's lock outlives a
// statement that failed, and is counted once more by the next. An error
// drops the connection, and its session with any gate it got; a grant
// whose outcome is unknown is released by owner, and its error returned
// as it is.
func (g *gate) first(ctx context.Context, r backend.Request) (bool, *lease, state, error) {
	d := g.gs.d
	// The statement runs to its end when ctx ends (some clients close a
	// connection whose statement is cancelled): the connection stays
	// usable, and the outcome known.
	sctx, stop := graceful(ctx, statementGrace)
	defer stop()
	a := d.acquireArgs(r)
	a["gate"] = g.key
	start := time.Now()
	var got bool
	var l *lease
	var s state
	var err error
	if d.dialect == DialectPostgres {
		var ok sql.NullBool
		var granted sql.NullInt64
		err = d.query(sctx, g.db, d.st.gateAcquire, a, func(rows *sql.Rows) error { return scanState(rows, &s, &ok, &g.sess, &granted) })
		got = ok.Bool
		if err == nil && granted.Valid {
			l = d.newLease(r, granted.Int64, start)
		}
	} else {
		var res sql.Result
		var n int64
		res, n, err = d.exec(sctx, d.quiet(g.db), d.st.gateAcquire, a)
		switch {
		case err == nil && n > 0:
			got = true
			l, _, err = d.mysqlGrant(sctx, r, res, start)
		case err == nil:
			var held sql.NullInt64
			err = d.query(sctx, g.db, d.st.gateHeld, a, func(rows *sql.Rows) error { return scanState(rows, &s, &held, &g.sess) })
			got = held.Int64 == 1
		}
	}
	switch {
	case err == nil:
		return got, l, s, nil
	case isTooLong(err):
		g.bad = true
		return false, nil, s, fmt.Errorf("%w: longer than the name column of table %s", backend.ErrInvalidName, d.table)
	case !nothingDone(err):
		g.bad = true
		d.cleanup(ctx, r)
		return false, nil, s, d.fail(ctx, err)
	}
	g.bad = true
	return false, nil, s, gateFailed{d.fail(ctx, err)}
}

// wait waits for the gate in the database's queue, on the calling
// goroutine, which goes on the moment the database grants the gate. On
// PostgreSQL with pgx the wait and the acquiring statement go together
// (a pipeline: the second statement runs, with a snapshot of its own, as
// the first returns), so that a hand-off costs no round trip of the
// waiter's: l is then the grant, if the row was free. A watcher looks at
// the row when the holder's lease should end, and cancels the wait —
// reporting got false and no error — when that lease ran out, or when the
// lock has stayed free for freeGrace: the gate is held by a process that
// stalled. It cancels the wait when ctx ends, too.
func (g *gate) wait(ctx context.Context, r backend.Request, s state) (got bool, l *lease, err error) {
	d := g.gs.d
	wctx, drop := context.WithCancel(context.WithoutCancel(ctx))
	defer drop()
	returned := make(chan struct{})
	var w watcher
	w.wg.Go(func() { w.cause = g.watch(ctx, r.Name, s, returned, drop, &w) })
	got, l, serr := g.block(wctx, r)
	close(returned)
	w.wg.Wait()
	if w.dropped || serr != nil && !(w.cause != nil && interrupted(serr)) {
		g.bad = true
	}
	switch {
	case w.cause != nil:
		// The wait was cancelled. A cancel that reaches the session as
		// its wait ends can fail the statement after the gate was
		// granted, and a session's lock outlives the statement: the
		// gate may be held whatever the outcome, so close lets it go
		// (an unlock of a gate not held does nothing).
		g.maybe = true
		if l != nil {
			return got, l, nil // the grant came first
		}
		if w.cause == errStalled {
			return got, nil, nil
		}
		return got, nil, w.cause
	case serr != nil && got:
		// The pipeline's acquiring statement failed after the wait:
		// released by owner if its outcome is unknown (pipeline).
		if !nothingDone(serr) {
			return got, nil, d.fail(ctx, serr)
		}
		return got, nil, gateFailed{d.fail(ctx, serr)}
	case serr != nil:
		return false, nil, gateFailed{d.fail(ctx, serr)}
	}
	return got, l, nil
}

// errStalled is why a watcher cancels a wait behind a stalled gate.
var errStalled = errors.New("mysqllock: the gate is held by a process that stalled")

// watcher is the state of a wait's watcher, read once its goroutine ended.
type watcher struct {
	wg      sync.WaitGroup
	cause   error // why it cancelled the wait: ctx's error, errStalled; nil if it did not
	dropped bool  // it dropped the connection
}

// watch runs beside a gate wait until returned closes: see wait.
func (g *gate) watch(ctx context.Context, name string, s state, returned <-chan struct{}, drop context.CancelFunc, w *watcher) error {
	d := g.gs.d
	t := time.NewTimer(lookAfter(s))
	defer t.Stop()
	var freeSince time.Time
	for {
		select {
		case <-returned:
			return nil
		case <-ctx.Done():
			w.dropped = g.cancel(ctx, returned, drop)
			return ctx.Err()
		case <-t.C:
		}
		s, err := d.look(ctx, name)
		switch {
		case err != nil:
			t.Reset(lookSlack) // transient (or ctx ended): look again soon
			continue
		case s.owner != "" && s.left > 0:
			freeSince = time.Time{}
			t.Reset(lookAfter(s))
			continue
		case s.owner == "" && freeSince.IsZero():
			freeSince = time.Now()
			t.Reset(freeGrace)
			continue
		case s.owner == "" && time.Since(freeSince) < freeGrace:
			t.Reset(freeGrace - time.Since(freeSince))
			continue
		}
		// The holder's lease ran out, or the lock stayed free: the
		// gate's holder has stalled.
		w.dropped = g.cancel(ctx, returned, drop)
		return errStalled
	}
}

// lookAfter is when a waiter blocked on the gate looks at a row found as
// s: when the holder's lease ends, unless renewed.
func lookAfter(s state) time.Duration {
	if s.owner == "" {
		return freeGrace
	}
	return max(s.left, 0) + lookSlack
}

// cancel ends the gate wait that runs until returned closes: it asks the
// server to cancel the statement — again and again, since a cancel that
// reaches the session before the statement does is ignored — and drops
// the connection if the statement has not ended after cancelWait. It
// reports whether it dropped it.
func (g *gate) cancel(ctx context.Context, returned <-chan struct{}, drop context.CancelFunc) bool {
	d := g.gs.d
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), cancelWait)
	defer ccancel()
	for again := time.Millisecond; ; again = min(2*again, 100*time.Millisecond) {
		if d.dialect == DialectMySQL {
			// KILL takes no parameter; the id is the server's own number.
			_ = d.db.WithContext(cctx).Exec("KILL QUERY " + strconv.FormatInt(g.sess, 10)).Error
		} else {
			_, _, _ = d.exec(cctx, d.db, d.st.gateCancel, args{"session": g.sess})
		}
		t := time.NewTimer(again)
		select {
		case <-returned:
			t.Stop()
			return false
		case <-t.C:
			continue
		case <-cctx.Done():
			t.Stop()
			drop()
			<-returned
			return true
		}
	}
}

// block sends the gate's wait on its connection and returns when the
// database answers: whether it got the gate, and on PostgreSQL with pgx
// the outcome of the acquiring statement sent with it (l, or nil when the
// row was held, or err).
func (g *gate) block(wctx context.Context, r backend.Request) (bool, *lease, error) {
	d := g.gs.d
	if d.pipe != nil {
		got, l, err, ok := g.pipeline(wctx, r)
		if ok {
			return got, l, err
		}
	}
	var v sql.NullInt64
	err := d.query(wctx, g.db, d.st.gateWait, args{"gate": g.key, "wait_s": gateWaitSeconds}, func(rows *sql.Rows) error {
		return rows.Scan(&v)
	})
	return err == nil && v.Int64 == 1, nil, err
}

// head takes the row while holding the gate, on its connection: at once,
// unless a hold without the gate has it; the lock is then looked at again
// (see the doc above).
func (g *gate) head(ctx context.Context, r backend.Request) (*lease, error) {
	d := g.gs.d
	pause := time.Millisecond
	var holder uint64
	for {
		l, err := d.try(ctx, g.db, r)
		if l != nil {
			l.gate = g
			return l, nil
		}
		var he *backend.HeldError
		if !errors.As(err, &he) {
			if !nothingDone(err) {
				// try released by owner, and will again later.
				g.bad = true
				return nil, err
			}
			g.bad = true
			return nil, gateFailed{err}
		}
		if he.Token != holder {
			pause, holder = time.Millisecond, he.Token
		}
		wait := pause
		if he.Left > 0 {
			wait = min(wait, he.Left)
		}
		pause = min(2*pause, maxHeadPause)
		if !driverkit.Pause(ctx.Done(), wait) {
			return nil, ctx.Err()
		}
	}
}

// release frees the row of l, whose hold has the gate, and lets the gate
// go, in one statement (release_gated). It reports whether the row was
// released. A hold that was lost leaves the gate to unlock; when the
// gate's connection fails, the row is released through the pool, and
// close drops the connection, whose session ends and lets the gate go.
func (g *gate) release(ctx context.Context, l *lease) (bool, error) {
	d := g.gs.d
	a := d.ownerArgs(l.Name, l.Owner)
	a["gate"] = g.key
	var n int64
	err := d.retry(ctx, func() error {
		if d.dialect == DialectMySQL {
			var err error
			_, n, err = d.exec(ctx, g.db, d.st.releaseGated, a)
			return err
		}
		var unlocked sql.NullBool
		return d.query(ctx, g.db, d.st.releaseGated, a, func(rows *sql.Rows) error { return rows.Scan(&n, &unlocked) })
	})
	switch {
	case err == nil && (n > 0 || d.dialect == DialectPostgres):
		g.held, g.maybe = false, false
	case err == nil:
		_ = g.unlock(ctx)
	default:
		g.bad = true
		err = d.retry(ctx, func() error {
			var err error
			_, n, err = d.exec(ctx, d.db, d.st.release, d.ownerArgs(l.Name, l.Owner))
			return err
		})
	}
	return n > 0, err
}

// unlock lets the gate go.
func (g *gate) unlock(ctx context.Context) error {
	d := g.gs.d
	_, _, err := d.exec(ctx, g.db, d.st.gateUnlock, args{"gate": g.key})
	if err != nil {
		g.bad = true
		return err
	}
	g.held, g.maybe = false, false
	return nil
}

// close gives the connection back to the pool, and the wait connection
// back to the budget. A gate still held is let go: by unlocking it, or by
// dropping a connection whose state is unknown, which ends its session.
func (g *gate) close(ctx context.Context) {
	if (g.held || g.maybe) && !g.bad {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		_ = g.unlock(uctx)
		cancel()
	}
	if g.bad {
		_ = g.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = g.conn.Close()
	<-g.gs.slots
}

// interrupted reports whether err is the error of a statement the server
// cancelled (gate_cancel).
func interrupted(err error) bool { return queryCancelled.in(err) }
