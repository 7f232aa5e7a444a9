package etcdlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/golocker/locker/backend"
)

// Acquire implements backend.Driver.
//
// A waiting Acquire creates the owner's key under the name's range and
// reads the range's lowest key in one transaction: the owner holds the
// lock when that is its own key. Otherwise it watches the deletion of the
// nearest older key only — each release wakes one waiter, the next in line
// — and checks again. A non-waiting Acquire creates its key only if the
// range is empty, in one transaction, so that it never queues nor gets in
// the way of another (create-then-delete would let a crowd of TryLocks see
// each other's keys and all fail, for ever). Every failure and every
// cancellation deletes the key before returning.
func (d *Driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for ctx.Err() == nil {
		s, err := d.session(ctx)
		if err != nil {
			return nil, err
		}
		l, err := d.acquireIn(ctx, s, r)
		if errors.Is(err, errSessionEnded) {
			// The session ended, or the key vanished, while the
			// acquisition was in flight: queue again in a live session.
			continue
		}
		return l, err
	}
	return nil, ctx.Err()
}

// acquireIn runs one acquisition in session s.
func (d *Driver) acquireIn(ctx context.Context, s *session, r backend.Request) (backend.Lease, error) {
	pfx := d.namePrefix(r.Name)
	key := pfx + keySuffix(s.id, r.Owner)
	abort := d.abortKey(r.Name, key)
	put := clientv3.OpPut(key, r.Owner, clientv3.WithLease(s.id))
	lowest := clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)
	free := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	if !r.Wait {
		free = clientv3.Compare(clientv3.CreateRevision(pfx), "=", 0).WithPrefix() // no key at all
	}
	// The watch that will report the key's deletion during a hold is set
	// up alongside the transaction that creates the key: one round trip
	// for both when the lock is free.
	ownW := d.watchOwn(key)
	// The write outlives ctx by a grace period, so that a caller who gives
	// up while it is in flight still learns whether it took effect.
	gctx, done := grace(ctx, cleanupTimeout)
	start := time.Now()
	resp, err := d.cli.Txn(gctx).
		If(free, clientv3.Compare(clientv3.CreateRevision(abort), "=", 0)).
		Then(put, lowest).
		Else(clientv3.OpGet(key), lowest).
		Commit()
	done()
	if err != nil {
		d.discard(ownW)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.end(errors.New("the session's lease expired on the server"))
			return nil, errSessionEnded
		}
		// The put may still be applied, after this very call: fence it
		// off, and delete it if it already was.
		d.abandon(ctx, s, key, abort)
		return nil, ctxErr(ctx, err)
	}
	rev := resp.Header.Revision
	low := resp.Responses[1].GetResponseRange().Kvs
	if !resp.Succeeded || len(low) == 0 || low[0].CreateRevision != rev {
		// Not granted at once: the hold, if it comes, watches from its
		// grant.
		d.drop(ctx, ownW)
		ownW = nil
	}
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		switch {
		case !r.Wait && len(kvs) == 0:
			return nil, backend.ErrHeld
		case len(kvs) == 0:
			return nil, errors.New("etcdlock: acquisition fenced off by its own abort key")
		}
		// The key exists already: an earlier attempt of this very
		// acquisition (owners are unique) whose answer was lost.
		rev = kvs[0].CreateRevision
	}
	if ctx.Err() != nil {
		if ownW != nil {
			d.discard(ownW)
		}
		d.remove(ctx, s, key, rev)
		return nil, ctx.Err()
	}
	if ownW != nil {
		return d.grantedWatched(ctx, s, key, rev, start, ownW)
	}
	if len(low) > 0 && low[0].CreateRevision == rev {
		return d.granted(ctx, s, key, rev, start)
	}
	if !r.Wait {
		d.remove(ctx, s, key, rev)
		return nil, backend.ErrHeld
	}
	return d.wait(ctx, s, pfx, key, rev)
}

// grace returns a context that ends d after ctx ends rather than when it
// does, and the function that releases it.
func grace(ctx context.Context, d time.Duration) (context.Context, func()) {
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var mu sync.Mutex
	var timer *time.Timer
	released := false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !released {
			timer = time.AfterFunc(d, cancel)
		}
	})
	return gctx, func() {
		stop()
		mu.Lock()
		released = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// wait waits until key, created at rev, is the lowest of its range.
func (d *Driver) wait(ctx context.Context, s *session, pfx, key string, rev int64) (backend.Lease, error) {
	pause := time.Duration(0) // after a watch that broke without an event
	for {
		if pause > 0 {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				d.remove(ctx, s, key, rev)
				return nil, ctx.Err()
			}
		}
		// The own key, and the nearest older one, at one revision.
		start := time.Now()
		resp, err := d.cli.Txn(ctx).Then(
			clientv3.OpGet(key),
			clientv3.OpGet(pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...),
		).Commit()
		if err != nil {
			d.remove(ctx, s, key, rev)
			return nil, ctxErr(ctx, err)
		}
		if own := resp.Responses[0].GetResponseRange().Kvs; len(own) == 0 || own[0].CreateRevision != rev {
			// The session expired, or someone deleted the key.
			return nil, errSessionEnded
		}
		older := resp.Responses[1].GetResponseRange().Kvs
		if len(older) == 0 {
			return d.granted(ctx, s, key, rev, start)
		}
		woke, err := d.awaitDeletion(ctx, s, string(older[0].Key), resp.Header.Revision+1)
		if err != nil {
			d.remove(ctx, s, key, rev)
			return nil, err
		}
		pause = 0
		if !woke {
			pause = min(max(s.ttl/20, 20*time.Millisecond), time.Second)
		}
	}
}

// awaitDeletion watches pred from revision from on, and returns when it
// was deleted (woke), when the watch broke (not woke: the caller checks
// again), or with an error when ctx ended, the session ended or the Driver
// was closed.
func (d *Driver) awaitDeletion(ctx context.Context, s *session, pred string, from int64) (woke bool, err error) {
	// WithRequireLeader: a member cut off from the cluster cancels the
	// watch instead of keeping it silent.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := d.cli.Watch(wctx, pred, clientv3.WithRev(from), clientv3.WithFilterPut())
	d.watching.Add(1)
	defer d.watching.Add(-1)
	select {
	case wr, ok := <-wch:
		if !ok || wr.Canceled || len(wr.Events) == 0 {
			return false, nil
		}
		d.predEvents.Add(int64(len(wr.Events)))
		return true, nil
	case <-s.done:
		return false, errSessionEnded
	case <-ctx.Done():
		return false, ctx.Err()
	case <-d.ctx.Done():
		return false, backend.ErrClosed
	}
}

// ownWatch is a watch on an acquisition's own key, started before the key
// exists: it reports the events after revision from.
type ownWatch struct {
	ch     clientv3.WatchChan
	cancel context.CancelFunc
	from   int64
	err    error // set up failed: no watch
}

// watchOwn starts a watch on key, which the acquisition is about to
// create, and delivers it once the server has confirmed it. Every watch
// it delivers must be passed to drop, discard or a lease.
func (d *Driver) watchOwn(key string) <-chan ownWatch {
	res := make(chan ownWatch, 1)
	if !d.goBackground(func() {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(d.ctx))
		ch := d.cli.Watch(wctx, key, clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
		wr, ok := <-ch
		if !ok || wr.Canceled || !wr.Created {
			cancel()
			res <- ownWatch{err: errors.New("etcdlock: the watch on the own key was not created")}
			return
		}
		res <- ownWatch{ch: ch, cancel: cancel, from: wr.Header.Revision}
	}) {
		res <- ownWatch{err: backend.ErrClosed}
	}
	return res
}

// drop cancels a watch of watchOwn that will not be used. It waits until
// the watch is set up, so that an acquisition that fails does not leave
// a watch behind it (a caller trying again and again would pile them
// up), unless ctx ends first: discard then finishes the job.
func (d *Driver) drop(ctx context.Context, w <-chan ownWatch) {
	select {
	case ow := <-w:
		if ow.cancel != nil {
			ow.cancel()
		}
	case <-ctx.Done():
		d.discard(w)
	}
}

// discard is drop in the background, for paths that must not wait: the
// server may be unreachable. Closing the Driver ends the watch anyway.
func (d *Driver) discard(w <-chan ownWatch) {
	d.goBackground(func() {
		select {
		case ow := <-w:
			if ow.cancel != nil {
				ow.cancel()
			}
		case <-d.ctx.Done():
		}
	})
}

// grantedWatched is granted with the watch that watchOwn started
// alongside the key's creation at rev. That watch covers the hold if it
// started before the key was created (from < rev): it then reports the
// key's deletion whenever it happens. If it started later, a deletion in
// between would go unseen, and granted sets up a watch from rev instead.
func (d *Driver) grantedWatched(ctx context.Context, s *session, key string, rev int64, start time.Time, w <-chan ownWatch) (backend.Lease, error) {
	var ow ownWatch
	select {
	case ow = <-w:
	case <-ctx.Done():
		d.discard(w)
		d.remove(ctx, s, key, rev)
		return nil, ctx.Err()
	}
	if ow.err != nil || ow.from >= rev {
		if ow.cancel != nil {
			ow.cancel()
		}
		return d.granted(ctx, s, key, rev, start)
	}
	l, err := d.newLease(ctx, s, key, rev, start, ow.ch, ow.cancel)
	if err != nil {
		ow.cancel()
	}
	return l, err
}

// granted makes the hold of key a lease, unless the session ended or the
// Driver was closed meanwhile. The watch on the key is set up before
// returning, so that nothing of the hold starts after Acquire returned.
func (d *Driver) granted(ctx context.Context, s *session, key string, rev int64, start time.Time) (backend.Lease, error) {
	if s.lost() {
		d.remove(ctx, s, key, rev)
		return nil, errSessionEnded
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(d.ctx))
	wch := d.cli.Watch(wctx, key, clientv3.WithRev(rev+1), clientv3.WithFilterPut())
	l, err := d.newLease(ctx, s, key, rev, start, wch, cancel)
	if err != nil {
		cancel()
	}
	return l, err
}

// newLease makes the hold of key a lease whose deletion wch reports,
// unless the session ended or the Driver was closed meanwhile.
func (d *Driver) newLease(ctx context.Context, s *session, key string, rev int64, start time.Time, wch clientv3.WatchChan, cancel context.CancelFunc) (backend.Lease, error) {
	l := &lease{
		d:        d,
		s:        s,
		key:      key,
		rev:      rev,
		start:    start,
		lost:     make(chan struct{}),
		released: make(chan struct{}),
	}
	if s.lost() {
		d.remove(ctx, s, key, rev)
		return nil, errSessionEnded
	}
	if !d.goBackground(func() { l.watch(wch, cancel) }) {
		d.remove(ctx, s, key, rev)
		return nil, backend.ErrClosed
	}
	return l, nil
}
