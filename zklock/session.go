package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// generation is the Driver's session as it last confirmed it: its id, and
// validUntil, a time before which the server cannot have expired it — the
// time a request that the server answered in that session was sent, plus
// the session timeout (the server restarts a session's countdown whenever
// it hears from the client). Every hold belongs to one generation and is
// lost with it.
//
// A generation ends when the client's session changes (the server expired
// it: go-zookeeper then opens a new session by itself, which must never
// pass for the old one), and when validUntil is near with no newer answer
// (the ensemble is out of reach, and may expire the session any moment): a
// margin before validUntil, so that the owner hears of it before another
// owner can be granted the lock. A later answer in the same session starts
// a new generation: holds already reported lost stay lost.
type generation struct {
	id      int64
	timeout time.Duration

	ctx    context.Context // ends with the generation; its cause says why
	cancel context.CancelCauseFunc

	mu         sync.Mutex
	validUntil time.Time
}

// margin is how long before validUntil a generation ends. Heartbeats go
// every timeout/5, so a fifth of the timeout leaves room for a slow or
// failed heartbeat.
func margin(timeout time.Duration) time.Duration { return timeout / 5 }

// heartbeatInterval is how often the monitor confirms the session.
func heartbeatInterval(timeout time.Duration) time.Duration { return timeout / 5 }

func (g *generation) deadline() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.validUntil.Add(-margin(g.timeout))
}

func (g *generation) extend(until time.Time) {
	g.mu.Lock()
	if until.After(g.validUntil) {
		g.validUntil = until
	}
	g.mu.Unlock()
}

func (g *generation) lost() bool { return g.ctx.Err() != nil }

func (g *generation) alive(now time.Time) bool { return !g.lost() && now.Before(g.deadline()) }

// fresh reports whether g will stay alive for half a timeout more without
// a new heartbeat: long enough for the monitor's next heartbeats to confirm
// it again. A new hold starts only in a fresh generation, so that a
// heartbeat answered late (which confirms the session only shortly ahead)
// cannot give a hold that is lost at once.
func (g *generation) fresh(now time.Time) bool { return g.alive(now.Add(g.timeout / 2)) }

// lostErr is the error of a hold whose generation ended: ErrLost, and why.
func (g *generation) lostErr() error {
	return fmt.Errorf("%w: %v", backend.ErrLost, context.Cause(g.ctx))
}

func (g *generation) end(cause error) { g.cancel(cause) }

// sessionTimeout is the timeout the server granted when it is known and
// shorter than the one asked for.
func (d *Driver) sessionTimeout() time.Duration {
	if d.log == nil {
		return d.timeout
	}
	if ms := d.log.negotiated.Load(); ms > 0 && time.Duration(ms)*time.Millisecond < d.timeout {
		return time.Duration(ms) * time.Millisecond
	}
	return d.timeout
}

var errNoSession = errors.New("zklock: no session yet")

// heartbeat sends a sync — which goes through the ensemble's leader, so a
// server cut off from the others cannot answer it — and, when it is
// answered in the session it was sent in, confirms that session until the
// send time plus the timeout.
//
// It is not sent while the client has no session (it is reconnecting): it
// would wait in go-zookeeper's queue and go out as the connection comes
// back, and its reply could then race with the client's re-sending of its
// watches (Conn.lastZxid, written by the receiving goroutine and read
// unlocked by sendSetWatches: go-zookeeper v1.0.4, upstream issue
// samuel/go-zookeeper#260, fix proposed in go-zookeeper/zk#35), which the
// race detector reported in TestLeaderKilledDuringAHold. The generation
// loses nothing: a queued heartbeat's send time would be older than that
// of the next one, sent once the session is back.
func (d *Driver) heartbeat(ctx context.Context) (*generation, error) {
	if d.conn.State() != zk.StateHasSession {
		return nil, errNoSession
	}
	sid := d.conn.SessionID()
	sent := time.Now()
	if err := d.call(ctx, func() error { _, err := d.conn.Sync("/"); return err }); err != nil {
		return nil, err
	}
	if sid == 0 || d.conn.SessionID() != sid {
		return nil, errNoSession
	}
	return d.confirm(sid, sent), nil
}

// confirm records that session sid was alive when a request answered in it
// was sent.
func (d *Driver) confirm(sid int64, sent time.Time) *generation {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.sessionTimeout()
	if g := d.gen; g != nil {
		if g.id == sid && !g.lost() {
			g.extend(sent.Add(t))
			return g
		}
		g.end(errors.New("the ZooKeeper session was replaced"))
	}
	g := &generation{id: sid, timeout: t, validUntil: sent.Add(t)}
	g.ctx, g.cancel = context.WithCancelCause(d.ctx)
	d.gen = g
	return g
}

// generation returns a fresh generation for an acquisition, sending a
// heartbeat when the current one is not.
func (d *Driver) generation(ctx context.Context) (*generation, error) {
	for {
		d.mu.Lock()
		g, closed := d.gen, d.closed
		d.mu.Unlock()
		if closed {
			return nil, backend.ErrClosed
		}
		if g != nil && g.fresh(time.Now()) && d.conn.SessionID() == g.id {
			return g, nil
		}
		g, err := d.heartbeat(ctx)
		switch {
		case err == nil && g.fresh(time.Now()):
			return g, nil
		case err != nil && !errors.Is(err, errNoSession) && !retryable(err):
			return nil, err
		}
		if !driverkit.Sleep(ctx, 10*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
}

// monitor ends the current generation when the session changes or its
// deadline passes, and sends a heartbeat every heartbeatInterval, until
// Close.
func (d *Driver) monitor() {
	tick := time.NewTicker(max(d.timeout/20, 10*time.Millisecond))
	defer tick.Stop()
	var last time.Time
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-tick.C:
		}
		if d.paused.Load() {
			continue
		}
		d.checkSession()
		if time.Since(last) < heartbeatInterval(d.sessionTimeout()) || !d.beating.CompareAndSwap(false, true) {
			continue
		}
		last = time.Now()
		started := d.goBackground(func() {
			defer d.beating.Store(false)
			_, _ = d.heartbeat(d.ctx)
		})
		if !started {
			return
		}
	}
}

func (d *Driver) checkSession() {
	d.mu.Lock()
	g := d.gen
	d.mu.Unlock()
	switch {
	case g == nil || g.lost():
	case d.conn.SessionID() != g.id:
		g.end(errors.New("the ZooKeeper session expired"))
	case !time.Now().Before(g.deadline()):
		g.end(fmt.Errorf("no answer from ZooKeeper in time to be sure of the session (timeout %v)", g.timeout))
	}
}

// remove deletes the node at path, of an acquisition that failed or gave
// up in generation g, with a context that is not the caller's (possibly
// cancelled) one and a short bound, so that an ensemble that does not
// answer cannot hang the caller; if that fails, in the background while
// the session lives: the node would otherwise block the name for as long
// as the session lives.
func (d *Driver) remove(ctx context.Context, g *generation, path string) {
	if d.crashed.Load() {
		return
	}
	gctx, cancel := driverkit.Grace(ctx, cleanupTimeout)
	err := d.delete(gctx, path)
	cancel()
	if err != nil {
		d.retryDelete(g.id, path)
	}
}

// delete deletes the node at path; it is not an error that it is gone.
func (d *Driver) delete(ctx context.Context, path string) error {
	err := d.call(ctx, func() error { return d.conn.Delete(path, -1) })
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

// retryDelete deletes the node at path, of session sid, in the background,
// until it is gone or goes with its session.
func (d *Driver) retryDelete(sid int64, path string) {
	if d.crashed.Load() {
		return
	}
	d.goBackground(func() {
		for wait := 50 * time.Millisecond; d.conn.SessionID() == sid; wait = min(2*wait, time.Second) {
			if !driverkit.Sleep(d.ctx, wait) {
				return
			}
			ctx, cancel := context.WithTimeout(d.ctx, cleanupTimeout)
			err := d.delete(ctx, path)
			cancel()
			if err == nil {
				return
			}
		}
	})
}
