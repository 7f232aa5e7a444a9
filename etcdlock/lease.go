package etcdlock

import (
	"context"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/golocker/locker/backend"
)

// lease is one hold: the owner's key, lowest of its range.
type lease struct {
	d     *Driver
	s     *session
	name  string
	slot  int // the key's slot in s, given back by Release
	key   string
	rev   int64 // the key's create revision: the fencing token
	start time.Time

	// lost is closed when the hold is gone behind the owner's back, and
	// never once Release has begun: the deletion Release makes must not
	// read as a loss.
	mu       sync.Mutex
	slotOnce sync.Once
	lost     *backend.LostSignal
	released chan struct{} // closed by Release: stops the watcher

	// wctx is the context of the watches on the key, which ends with the
	// session; stopWatch, called by Release, ends them too, and a Watch
	// call still waiting to be set up.
	wctx      context.Context
	stopWatch context.CancelFunc
}

func (l *lease) Token() uint64 { return uint64(l.rev) }

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

// putSlot gives the key's slot back, once.
func (l *lease) putSlot() {
	l.slotOnce.Do(func() { l.s.putSlot(l.name, l.slot) })
}

func (l *lease) markReleased() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !isClosed(l.released) {
		close(l.released)
		l.stopWatch()
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (l *lease) isLost() bool { return l.lost.Fired() }

// Renew implements backend.Lease. The session keeps the hold alive, so
// Renew only checks that the key is still there, with its create revision,
// in a session that has not ended; ttl is ignored.
func (l *lease) Renew(ctx context.Context, _ time.Duration) error {
	if l.s.lost() {
		return l.s.lostErr()
	}
	if l.isLost() {
		return backend.ErrLost
	}
	resp, err := l.d.cli.Get(ctx, l.key)
	if err != nil {
		return ctxErr(ctx, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.rev {
		l.markLost()
		return backend.ErrLost
	}
	return nil
}

// Release implements backend.Lease: it deletes the key only if it is still
// the one created for this hold (same create revision). A hold already
// reported lost is deleted if it is still there, and reported ErrLost.
func (l *lease) Release(ctx context.Context) error {
	l.markReleased()
	// The key is deleted, or recorded as an orphan, before its slot is
	// given back.
	defer l.putSlot()
	resp, err := l.d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)).
		Then(clientv3.OpDelete(l.key)).
		Commit()
	if err != nil {
		if !l.s.lost() {
			l.s.addOrphan(l.key, orphan{rev: l.rev}) // deleted by the keepalive loop
		}
		return ctxErr(ctx, err)
	}
	if !resp.Succeeded || l.isLost() {
		return backend.ErrLost
	}
	return nil
}

// watchDelay is how long a hold lasts before its key is watched.
const watchDelay = 100 * time.Millisecond

// watch closes lost when the key is deleted behind the owner's back or the
// session ends, until Release. It runs on a goroutine that Close waits
// for. Its first watch starts at the revision after the grant.
func (l *lease) watch() {
	// A hold that ends within watchDelay never sets up a watch: the
	// server's work for it is the two transactions alone, and a burst
	// of short holds cannot queue up watch creations (clientv3 creates
	// a stream's watches one at a time). A deletion during the delay is
	// reported all the same: the watch starts from the grant's revision.
	t := time.NewTimer(watchDelay)
	select {
	case <-t.C:
	case <-l.released:
		t.Stop()
		return
	case <-l.s.done:
		t.Stop()
		l.markLost()
		return
	case <-l.d.ctx.Done():
		t.Stop()
		l.markLost()
		return
	}
	from := l.rev + 1
	for {
		if isClosed(l.released) {
			return
		}
		wctx, cancel := context.WithCancel(l.wctx)
		gone, stop := l.await(l.d.cli.Watch(wctx, l.key, clientv3.WithRev(from), clientv3.WithFilterPut()))
		cancel()
		switch {
		case gone:
			l.markLost()
			return
		case stop || isClosed(l.released):
			return
		}
		// The watch broke (no leader, compacted revision, reconnection):
		// check the key, then watch again from there.
		from, gone, stop = l.check()
		if gone {
			l.markLost()
			return
		}
		if stop {
			return
		}
	}
}

// await waits on one watch: gone when the key was deleted or the session
// ended, stop when the hold was released or the Driver closed, neither when
// the watch broke.
func (l *lease) await(wch clientv3.WatchChan) (gone, stop bool) {
	for {
		select {
		case <-l.released:
			return false, true
		case <-l.s.done:
			return true, false
		case <-l.d.ctx.Done():
			return true, false
		case wr, ok := <-wch:
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					return true, false
				}
			}
			if !ok || wr.Canceled {
				return false, false
			}
		}
	}
}

// check reads the key after a broken watch, retrying while the session
// lives: gone when it is no longer this hold's key, else the revision to
// watch from.
func (l *lease) check() (from int64, gone, stop bool) {
	pause := max(l.s.ttl/20, 20*time.Millisecond)
	for {
		ctx, cancel := context.WithTimeout(l.s.ctx, l.s.ttl/3)
		resp, err := l.d.cli.Get(ctx, l.key)
		cancel()
		if err == nil {
			if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.rev {
				return 0, true, false
			}
			return resp.Header.Revision + 1, false, false
		}
		select {
		case <-l.released:
			return 0, false, true
		case <-l.s.done:
			return 0, true, false
		case <-l.d.ctx.Done():
			return 0, true, false
		case <-time.After(pause):
		}
	}
}
