package zklock

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/golocker/locker/backend"
)

// lease is one hold: the owner's node, lowest of its lock.
type lease struct {
	d     *Driver
	g     *generation
	path  string
	czxid int64  // the node's
	token uint64 // the node's czxid, or the zxid of the pass that made the lease
	start time.Time

	// dirVersion is the version of the lock's node after the create of
	// this one's, which wrote it (noVersion: unknown). Every create of a
	// lock node writes its lock's node, so an unchanged version means that
	// no other node was created since: nobody waits behind the hold.
	dirVersion int32

	lost *backend.LostSignal
	stop func() bool // stops the loss at the generation's end

	// released is closed by Release: it stops the watcher, and the
	// deletion Release makes must not read as a loss.
	mu       sync.Mutex
	released chan struct{}
}

func (l *lease) Token() uint64 { return l.token }

func (l *lease) Start() time.Time { return l.start }

func (l *lease) Lost() *backend.LostSignal { return l.lost }

// markLost fires lost unless the hold was released; it reports whether
// this call did.
func (l *lease) markLost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.released:
		return false
	default:
		return l.lost.Fire()
	}
}

// Renew implements backend.Lease. The session keeps the hold alive, so
// Renew only checks that the node is still there, in the session of its
// generation, which has not ended; ttl is ignored. A check that fails when
// the session can no longer be vouched for reports the hold lost (failed).
func (l *lease) Renew(ctx context.Context, _ time.Duration) error {
	if l.g.lost() {
		return l.g.lostErr()
	}
	if l.lost.Fired() {
		return backend.ErrLost
	}
	var st *zk.Stat
	var exists bool
	err := l.d.call(ctx, func() (err error) { exists, st, err = l.d.conn.Exists(l.path); return err })
	if err != nil {
		return l.failed(ctx, err)
	}
	if !exists || st.Czxid != l.czxid || st.EphemeralOwner != l.g.id {
		l.markLost()
		return backend.ErrLost
	}
	return nil
}

// Release implements backend.Lease: it deletes the node, whose path
// (sequence and GUID) no other hold can have. A hold already reported lost
// is deleted if it is still there, and reported ErrLost. A deletion that
// fails is tried again in the background while the session lives, and
// reported ErrLost when the session can no longer be vouched for (failed).
func (l *lease) Release(ctx context.Context) error {
	if !l.end() && l.lost.Fired() && l.g.lost() {
		return l.g.lostErr() // its node is being deleted, or went with the session
	}
	err := l.d.call(ctx, func() error { return l.d.conn.Delete(l.path, -1) })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return backend.ErrLost
	case err != nil:
		l.d.retryDelete(l.g.id, l.path)
		return l.failed(ctx, err)
	case l.lost.Fired():
		return backend.ErrLost
	}
	return nil
}

// end marks the hold released: the watcher stops, and the end of the
// generation no longer makes it lost. It reports whether the generation's
// end had already done so.
func (l *lease) end() bool {
	l.mu.Lock()
	close(l.released)
	l.mu.Unlock()
	return !l.stop()
}

// Pass implements backend.Passer: the node stays, and goes to r.Owner with
// a new fencing token, in one transaction that fails unless the version of
// the lock's node is the one the create of this hold's node left — that
// is, unless no other node was created since, by another Client or
// process, which then waits first: Pass declines, and keeps the order of
// arrival across Clients. The transaction writes the node's data (the
// owner, which Holds shows), and the zxid of that write, greater than
// every token before it and lower than those of every node created after
// it, is the new token. A hold whose session may not last half a timeout
// more is not passed, nor one whose lock's version is unknown.
func (l *lease) Pass(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if l.dirVersion == noVersion || l.lost.Fired() || !l.g.fresh(time.Now()) {
		return nil, nil
	}
	start := time.Now()
	var mr []zk.MultiResponse
	err := l.d.call(ctx, func() (err error) {
		mr, err = l.d.conn.Multi(
			&zk.CheckVersionRequest{Path: path.Dir(l.path), Version: l.dirVersion},
			&zk.SetDataRequest{Path: l.path, Data: []byte(r.Owner), Version: -1},
		)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
		return nil, nil // someone waits, or the hold is lost: Release says which
	case err != nil:
		return nil, l.d.storeErr(ctx, err)
	case len(mr) != 2 || mr[1].Stat == nil:
		return nil, fmt.Errorf("zklock: %s: unexpected response to a multi passing %s", l.d.servers, l.path)
	}
	next, err := l.d.newLease(l.g, l.path, l.czxid, uint64(mr[1].Stat.Mzxid), l.dirVersion, start)
	if err != nil {
		return nil, nil // the generation ended, or the Driver closed: Release says which
	}
	l.end()
	if l.lost.Fired() {
		// The generation ended as the hold was passed: the node is being
		// deleted, and next is lost as well.
		next.markLost()
	}
	return next, nil
}

// failed is the error of a request for l that failed with err. When l's
// generation can no longer be vouched for — its deadline passed before the
// monitor could end it, as in a process that resumes after a pause longer
// than the session timeout — the server may have expired the session and
// granted the lock to another owner: the hold is lost. Otherwise the
// outcome is unknown, and the error says why.
func (l *lease) failed(ctx context.Context, err error) error {
	if !l.g.alive(time.Now()) {
		l.markLost()
		return fmt.Errorf("%w: the ZooKeeper session was last confirmed too long ago to be sure of it (timeout %v), and the request failed: %w",
			backend.ErrLost, l.g.timeout, l.d.storeErr(ctx, err))
	}
	return l.d.storeErr(ctx, err)
}

// watchDelay is how long a hold lasts before its node is watched.
const watchDelay = 100 * time.Millisecond

// watch fires lost when the node is deleted behind the owner's back, until
// Release, a pass or the end of the generation (see newLease). It runs on a
// goroutine that Close waits for. The watch is set only once the hold has
// lasted watchDelay: a short hold costs the create, the listing and the
// delete alone, as zk.Lock's does. A deletion during the delay is seen all
// the same: the node is then missing.
func (l *lease) watch() {
	select {
	case <-time.After(watchDelay):
	case <-l.released:
		return
	case <-l.g.ctx.Done():
		return
	}
	for retry := 20 * time.Millisecond; ; {
		select {
		case <-l.released: // passed: the pass changed the node
			return
		default:
		}
		var st *zk.Stat
		var gw, w <-chan zk.Event // gw is written by the call, w read after it
		var again <-chan time.Time
		err := l.d.call(l.g.ctx, func() (err error) { _, st, gw, err = l.d.conn.GetW(l.path); return err })
		switch {
		case errors.Is(err, zk.ErrNoNode), err == nil && st.Czxid != l.czxid:
			l.markLost()
			return
		case err != nil:
			// No connection: a session that expires ends the generation.
			again, retry = time.After(retry), min(2*retry, time.Second)
		default:
			w = gw
		}
		select {
		case <-w: // a change of the node: look again
		case <-again:
		case <-l.g.ctx.Done():
			return
		case <-l.released:
			return
		}
	}
}
