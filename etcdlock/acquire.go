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
	slot := s.takeSlot(r.Name, func(i int) string { return pfx + keySuffix(s.id, i) })
	key := pfx + keySuffix(s.id, slot)
	// The slot goes back when the acquisition ends without a hold (its
	// key deleted, or recorded as an orphan, by then), or with the hold's
	// Release.
	held := false
	defer func() {
		if !held {
			s.putSlot(r.Name, slot)
		}
	}()
	took := func(l backend.Lease, err error) (backend.Lease, error) {
		held = l != nil
		return l, err
	}
	abort := d.abortKey(r.Name, key, r.Owner)
	put := clientv3.OpPut(key, r.Owner, clientv3.WithLease(s.id))
	lowest := clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)
	free := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	if !r.Wait {
		free = clientv3.Compare(clientv3.CreateRevision(pfx), "=", 0).WithPrefix() // no key at all
	}
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
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		switch {
		case !r.Wait && len(kvs) == 0:
			return nil, backend.ErrHeld
		case len(kvs) == 0:
			return nil, errors.New("etcdlock: acquisition fenced off by its own abort key")
		case string(kvs[0].Value) != r.Owner:
			// Another acquisition's key: a slot is given back only once
			// its key is gone, so this cannot happen; keep the slot
			// out of use and take another.
			held = true
			return nil, errSessionEnded
		}
		// The key exists already: an earlier attempt of this very
		// acquisition (owners are unique) whose answer was lost.
		rev = kvs[0].CreateRevision
	}
	if ctx.Err() != nil {
		d.remove(ctx, s, key, rev)
		return nil, ctx.Err()
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 && kvs[0].CreateRevision == rev {
		return took(d.granted(ctx, s, r.Name, slot, key, rev, start))
	}
	if !r.Wait {
		d.remove(ctx, s, key, rev)
		return nil, backend.ErrHeld
	}
	return took(d.wait(ctx, s, r.Name, slot, pfx, key, rev))
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
func (d *Driver) wait(ctx context.Context, s *session, name string, slot int, pfx, key string, rev int64) (backend.Lease, error) {
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
			return d.granted(ctx, s, name, slot, key, rev, start)
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

// granted makes the hold of key a lease, unless the session ended or the
// Driver was closed meanwhile. The watch that reports the key's deletion
// is set up in the background once the hold has lasted watchDelay:
// clientv3's Watch waits for the server's confirmation, a round trip that
// Acquire need not wait for. The watch starts at the revision after the
// grant, so that a deletion before it was set up is reported all the same;
// Release cancels it, set up or not.
func (d *Driver) granted(ctx context.Context, s *session, name string, slot int, key string, rev int64, start time.Time) (backend.Lease, error) {
	wctx, stop := context.WithCancel(clientv3.WithRequireLeader(s.ctx)) // ends with the session too
	l := &lease{
		d:         d,
		s:         s,
		name:      name,
		slot:      slot,
		key:       key,
		rev:       rev,
		start:     start,
		lost:      backend.NewLostSignal(),
		released:  make(chan struct{}),
		wctx:      wctx,
		stopWatch: stop,
	}
	if s.lost() {
		stop()
		d.remove(ctx, s, key, rev)
		return nil, errSessionEnded
	}
	if !d.goBackground(l.watch) {
		stop()
		d.remove(ctx, s, key, rev)
		return nil, backend.ErrClosed
	}
	return l, nil
}
