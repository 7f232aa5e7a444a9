package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// Acquire implements backend.Driver: one transaction creates the owner's
// key only if the name's range is empty, so that an attempt never queues
// nor gets in the way of another (creating the key and deleting it when it
// is not the lowest would let a crowd of TryLocks see each other's keys and
// all fail, for ever). When the range is not empty, the error says who
// holds the lock, from the same transaction.
func (d *Driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	return d.acquire(ctx, r, false)
}

// AcquireWait implements backend.Waiter: one transaction creates the
// owner's key under the name's range and reads the range's lowest key; the
// owner holds the lock when that is its own key. Otherwise it waits for the
// deletion of the nearest older key only — each release wakes one waiter,
// the next in line — and then checks, in one read, that its key still
// exists in a live session and whether it is now the lowest.
func (d *Driver) AcquireWait(ctx context.Context, r backend.Request) (backend.Lease, error) {
	return d.acquire(ctx, r, true)
}

// acquire runs attempts in the Driver's live session: again when the
// session ended while one was in flight (the key went with it) and, for a
// wait, after a failure the cluster may recover from (no leader, a lost
// connection), until ctx ends. Every failure and every cancellation deletes
// the key before returning.
func (d *Driver) acquire(ctx context.Context, r backend.Request, wait bool) (backend.Lease, error) {
	return driverkit.Attempts(ctx, wait, d.session, func(s *session) (backend.Lease, error) {
		return d.attempt(ctx, s, r, wait)
	}, errSessionEnded, transient)
}

// transient reports whether an attempt failed for a reason that passes: the
// cluster has no leader, the connection was lost, the key is busy.
func transient(err error) bool {
	if errors.Is(err, errBusy) {
		return true
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unavailable
}

// attempt runs one acquisition in session s, between the begin and done
// that let a Release delete its key without a compare (keyUses).
func (d *Driver) attempt(ctx context.Context, s *session, r backend.Request, wait bool) (backend.Lease, error) {
	base := d.key(r.Name, s)
	key, err := s.uses.begin(ctx, base, s.ctx.Done(), d.ctx.Done())
	if err != nil {
		return nil, err
	}
	l, err := d.create(ctx, s, r, wait, base, key)
	s.uses.done(base, l)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// create creates key, the session's key of the name (whose first key is
// base), and waits, if wait, until it is the lowest of its range.
func (d *Driver) create(ctx context.Context, s *session, r backend.Request, wait bool, base, key string) (*lease, error) {
	pfx := d.namePrefix(r.Name)
	free := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	if !wait {
		free = clientv3.Compare(clientv3.CreateRevision(pfx), "=", 0).WithPrefix() // no key at all
	}
	lowest := clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)
	start := time.Now()
	resp, err := d.cli.Txn(ctx).
		If(free, clientv3.Compare(clientv3.CreateRevision(d.abortKey(r.Owner)), "=", 0)).
		Then(clientv3.OpPut(key, r.Owner, clientv3.WithLease(s.id)), lowest).
		Else(clientv3.OpGet(key), lowest).
		Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.end(errLeaseExpired)
		return nil, errSessionEnded
	}
	if err != nil {
		// The put may still be applied, after this very call: fence it
		// off, and delete it if it already was. Until the fence is up,
		// it could make the key again behind a later hold, so the name
		// moves to a new key.
		s.uses.move(base)
		d.abandon(ctx, s, key, r.Owner)
		return nil, d.storeErr(ctx, err)
	}
	rev := resp.Header.Revision
	first := resp.Responses[1].GetResponseRange().Kvs
	if !resp.Succeeded {
		own := resp.Responses[0].GetResponseRange().Kvs
		switch {
		case !wait:
			return nil, heldError(first)
		case len(own) == 0:
			return nil, fmt.Errorf("etcdlock: acquisition by %s fenced off by its own abort key", r.Owner)
		case string(own[0].Value) != r.Owner:
			return nil, errBusy
		}
		rev = own[0].CreateRevision
	}
	if ctx.Err() != nil {
		d.remove(ctx, s, key, rev)
		return nil, ctx.Err()
	}
	if len(first) > 0 && first[0].CreateRevision == rev {
		return d.granted(ctx, s, base, key, rev, start)
	}
	return d.wait(ctx, s, pfx, base, key, rev)
}

// heldError is the error of an attempt that found first holding the lock.
func heldError(first []*mvccpb.KeyValue) error {
	if len(first) == 0 {
		return backend.ErrHeld
	}
	return &backend.HeldError{Owner: string(first[0].Value), Token: uint64(first[0].CreateRevision)}
}

// wait waits until key, created at rev, is the lowest of its range.
func (d *Driver) wait(ctx context.Context, s *session, pfx, base, key string, rev int64) (*lease, error) {
	for {
		// The own key, and the nearest older one, at one revision.
		start := time.Now()
		resp, err := d.cli.Txn(ctx).Then(
			clientv3.OpGet(key),
			clientv3.OpGet(pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...),
		).Commit()
		if err != nil {
			d.remove(ctx, s, key, rev)
			return nil, d.storeErr(ctx, err)
		}
		if own := resp.Responses[0].GetResponseRange().Kvs; len(own) == 0 || own[0].CreateRevision != rev {
			// The session expired, or someone deleted the key: the
			// place in the queue is gone, never to be taken for a hold.
			return nil, errSessionEnded
		}
		older := resp.Responses[1].GetResponseRange().Kvs
		if len(older) == 0 {
			return d.granted(ctx, s, base, key, rev, start)
		}
		woke := make(chan struct{}, 1)
		unsubscribe := d.subscribe(string(older[0].Key), resp.Header.Revision+1, func(bool) {
			select {
			case woke <- struct{}{}:
			default:
			}
		})
		d.waiting.Add(1)
		select {
		case <-woke:
			d.waiting.Add(-1)
			d.wakeups.Add(1)
			unsubscribe()
			continue
		case <-s.ctx.Done():
			err = errSessionEnded
		case <-ctx.Done():
			err = ctx.Err()
		case <-d.ctx.Done():
			err = backend.ErrClosed
		}
		d.waiting.Add(-1)
		unsubscribe()
		d.remove(ctx, s, key, rev)
		return nil, err
	}
}

// granted makes the hold of key, created at rev, a lease, unless the
// session ended meanwhile. The key is watched from rev+1 once the hold has
// lasted watchDelay, so that a deletion during the delay is reported all
// the same.
func (d *Driver) granted(ctx context.Context, s *session, base, key string, rev int64, start time.Time) (*lease, error) {
	l := &lease{d: d, s: s, base: base, key: key, rev: rev, start: start, lost: backend.NewLostSignal()}
	l.timer = time.AfterFunc(watchDelay, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.released {
			l.unwatch = d.subscribe(key, rev+1, func(sure bool) {
				if sure {
					l.markLost()
				} else {
					d.goBackground(l.check)
				}
			})
		}
	})
	l.stop = context.AfterFunc(s.ctx, l.markLost)
	if s.lost() {
		l.end()
		d.remove(ctx, s, key, rev)
		return nil, errSessionEnded
	}
	return l, nil
}
