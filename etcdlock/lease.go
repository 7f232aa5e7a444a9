package etcdlock

import (
	"context"
	"errors"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/golocker/locker/backend"
)

// lease is one hold: the owner's key, lowest of its range.
type lease struct {
	d     *Driver
	s     *session
	base  string // the session's first key of the name (keyUses)
	key   string
	rev   int64 // the key's create revision: the fencing token
	start time.Time
	lost  *backend.LostSignal
	timer *time.Timer // sets up the watch of the key
	stop  func() bool // stops the loss at the session's end

	// released is set by Release: the deletion it makes must not read as
	// a loss. unwatch ends the watch of the key, once set up.
	mu       sync.Mutex
	released bool
	unwatch  func()
}

func (l *lease) Token() uint64 { return uint64(l.rev) }

func (l *lease) Start() time.Time { return l.start }

func (l *lease) Lost() *backend.LostSignal { return l.lost }

// end stops what would fire lost: the watch (set up or not) and the end
// of the session.
func (l *lease) end() {
	l.mu.Lock()
	l.released = true
	l.timer.Stop()
	if l.unwatch != nil {
		l.unwatch()
	}
	l.mu.Unlock()
	l.stop()
}

func (l *lease) markLost() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.released {
		l.lost.Fire()
	}
}

// check reads the key, when the watch cannot tell whether it was deleted,
// and fires lost if it is no longer this hold's.
func (l *lease) check() {
	for range 3 {
		ctx, cancel := context.WithTimeout(l.s.ctx, cleanupTimeout)
		err := l.Renew(ctx, 0)
		cancel()
		if err == nil || errors.Is(err, backend.ErrLost) || l.s.lost() {
			return
		}
	}
}

// Renew implements backend.Lease. The session keeps the hold alive, so
// Renew only checks that the key is still there, with its create revision,
// in a session that has not ended; ttl is ignored.
func (l *lease) Renew(ctx context.Context, _ time.Duration) error {
	if l.s.lost() {
		return l.s.lostErr()
	}
	if l.lost.Fired() {
		return backend.ErrLost
	}
	resp, err := l.d.cli.Get(ctx, l.key)
	if err != nil {
		return l.d.storeErr(ctx, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.rev {
		l.markLost()
		return backend.ErrLost
	}
	return nil
}

// Release implements backend.Lease: it deletes the key, with a plain Delete
// when nothing but this hold can have made it (keyUses), else only if it is
// still the one created for this hold (same create revision). A hold
// already reported lost is deleted if it is still there, and reported
// ErrLost. A deletion that fails is tried again in the background while the
// session lives: the key would otherwise block the name.
func (l *lease) Release(ctx context.Context) error {
	l.end()
	if l.s.lost() {
		return l.s.lostErr() // revoked, or expired, with its keys
	}
	if l.s.uses.plain(l.base, l) {
		if l.d.beforeDelete != nil {
			l.d.beforeDelete()
		}
		resp, err := l.d.cli.Delete(ctx, l.key)
		l.s.uses.deleted(l.base, err != nil)
		if err != nil {
			l.d.retry(l.s, func(ctx context.Context) error { return l.d.deleteKey(ctx, l.key, l.rev) })
			return l.d.storeErr(ctx, err)
		}
		if resp.Deleted == 0 || l.lost.Fired() {
			return backend.ErrLost
		}
		return nil
	}
	resp, err := l.d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)).
		Then(clientv3.OpDelete(l.key)).
		Commit()
	if err != nil {
		l.d.retry(l.s, func(ctx context.Context) error { return l.d.deleteKey(ctx, l.key, l.rev) })
		return l.d.storeErr(ctx, err)
	}
	if !resp.Succeeded || l.lost.Fired() {
		return backend.ErrLost
	}
	return nil
}
