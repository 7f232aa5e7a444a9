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

	// lost is closed when the hold is gone behind the owner's back, and
	// never once Release has begun: the deletion Release makes must not
	// read as a loss.
	mu       sync.Mutex
	lost     *backend.LostSignal
	released chan struct{} // closed by Release: stops the watcher
}

func (l *lease) Token() uint64 { return l.token }

func (l *lease) Start() time.Time { return l.start }

func (l *lease) Lost() <-chan struct{} { return l.lost.C() }

// AfterLost implements backend.LostNotifier.
func (l *lease) AfterLost(f func()) (stop func() bool) { return l.lost.AfterLost(f) }

func (l *lease) markLost() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !isClosed(l.released) {
		l.lost.Fire()
	}
}

func (l *lease) markReleased() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !isClosed(l.released) {
		close(l.released)
	}
}

func (l *lease) isLost() bool { return l.lost.Fired() }

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Renew implements backend.Lease. The session keeps the hold alive, so
// Renew only checks that the node is still there, in the session of its
// generation, which has not ended; ttl is ignored.
func (l *lease) Renew(ctx context.Context, _ time.Duration) error {
	if l.g.lost() {
		return l.g.lostErr()
	}
	if l.isLost() {
		return backend.ErrLost
	}
	var st *zk.Stat
	var exists bool
	err := l.d.call(ctx, func() (err error) { exists, st, err = l.d.conn.Exists(l.path); return err })
	if err != nil {
		return ctxErr(ctx, err)
	}
	if !exists || uint64(st.Czxid) != l.token || st.EphemeralOwner != l.g.id {
		l.markLost()
		return backend.ErrLost
	}
	return nil
}

// Release implements backend.Lease: it deletes the node, whose path
// (sequence and GUID) no other hold can have. A hold already reported lost
// is deleted if it is still there, and reported ErrLost.
func (l *lease) Release(ctx context.Context) error {
	l.markReleased()
	err := l.d.call(ctx, func() error { return l.d.conn.Delete(l.path, -1) })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return backend.ErrLost
	case err != nil:
		l.d.forget(l.path, l.g.id) // deleted by the heartbeat
		return ctxErr(ctx, err)
	case l.isLost():
		return backend.ErrLost
	}
	return nil
}

// watch closes lost when the node is deleted behind the owner's back or
// its generation ends, until Release. It runs on a goroutine that Close
// waits for. ownW is the watch on the node, or nil when the acquisition
// did not set one: watch sets it, unless the hold is released first.
func (l *lease) watch(ownW <-chan zk.Event) {
	if ownW == nil && !l.rewatch(&ownW) {
		return
	}
	for {
		select {
		case ev := <-ownW:
			if ev.Type == zk.EventNodeDeleted || ev.Type == zk.EventNotWatching {
				l.markLost()
				return
			}
			// Its data changed: watch it again.
			if !l.rewatch(&ownW) {
				return
			}
		case <-l.g.done:
			// The session may be alive still (the ensemble was out of
			// reach): the node must not outlive the hold.
			l.markLost()
			l.d.forget(l.path, l.g.id)
			return
		case <-l.released:
			return
		case <-l.d.ctx.Done():
			l.markLost()
			return
		}
	}
}

// rewatch sets *ownW, a watch on the node, and reports whether it did and
// the hold is not released. When the node is gone, or the request fails,
// the hold is lost.
func (l *lease) rewatch(ownW *<-chan zk.Event) bool {
	if isClosed(l.released) {
		return false
	}
	var st *zk.Stat
	err := l.d.call(l.d.ctx, func() (err error) { _, st, *ownW, err = l.d.conn.GetW(l.path); return err })
	switch {
	case err == nil && uint64(st.Czxid) == l.token:
		return !isClosed(l.released)
	case err == nil, errors.Is(err, zk.ErrNoNode):
	default:
		l.d.forget(l.path, l.g.id)
	}
	l.markLost()
	return false
}
