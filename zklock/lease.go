package zklock

import (
	"context"
	"errors"
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
	token uint64 // the node's czxid
	start time.Time
	lost  *backend.LostSignal
	stop  func() bool // stops the loss at the generation's end

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
// generation, which has not ended; ttl is ignored.
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
		return l.d.storeErr(ctx, err)
	}
	if !exists || uint64(st.Czxid) != l.token || st.EphemeralOwner != l.g.id {
		l.markLost()
		return backend.ErrLost
	}
	return nil
}

// Release implements backend.Lease: it deletes the node, whose path
// (sequence and GUID) no other hold can have. A hold already reported lost
// is deleted if it is still there, and reported ErrLost. A deletion that
// fails is tried again in the background while the session lives.
func (l *lease) Release(ctx context.Context) error {
	l.mu.Lock()
	close(l.released)
	l.mu.Unlock()
	if !l.stop() && l.lost.Fired() && l.g.lost() {
		return l.g.lostErr() // its node is being deleted, or went with the session
	}
	err := l.d.call(ctx, func() error { return l.d.conn.Delete(l.path, -1) })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return backend.ErrLost
	case err != nil:
		l.d.retryDelete(l.g.id, l.path)
		return l.d.storeErr(ctx, err)
	case l.lost.Fired():
		return backend.ErrLost
	}
	return nil
}

// watchDelay is how long a hold lasts before its node is watched.
const watchDelay = 100 * time.Millisecond

// watch fires lost when the node is deleted behind the owner's back, until
// Release or the end of the generation (see granted). It runs on a
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
		var st *zk.Stat
		var gw, w <-chan zk.Event // gw is written by the call, w read after it
		var again <-chan time.Time
		err := l.d.call(l.g.ctx, func() (err error) { _, st, gw, err = l.d.conn.GetW(l.path); return err })
		switch {
		case errors.Is(err, zk.ErrNoNode), err == nil && uint64(st.Czxid) != l.token:
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
