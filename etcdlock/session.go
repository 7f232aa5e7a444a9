package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// session is one lease of the Driver, kept alive by its own keepalive loop.
// Every key the Driver writes is attached to the current session, so that
// the keys of a Driver that dies are freed when its lease expires.
type session struct {
	id     clientv3.LeaseID
	ttl    time.Duration   // granted by the server
	ctx    context.Context // ends with the session; its cause says why
	cancel context.CancelCauseFunc
	uses   keyUses // what Release needs to know to delete without a compare
}

func (s *session) lost() bool { return s.ctx.Err() != nil }

func (s *session) end(cause error) { s.cancel(cause) }

// lostErr is the error of a hold whose session ended: ErrLost, and why.
func (s *session) lostErr() error {
	return fmt.Errorf("%w: %v", backend.ErrLost, context.Cause(s.ctx))
}

var errLeaseExpired = errors.New("the session's lease expired on the server")

// session returns the Driver's live session, granting a new one when there
// is none or the last one ended; one acquisition grants it, the others
// wait for it. The first session starts the Driver's watch stream and
// waits for it to be set up, so that Open returns a Driver whose
// background work has all begun.
func (d *Driver) session(ctx context.Context) (*session, error) {
	if s, err := d.current(); s != nil || err != nil {
		return s, err
	}
	select {
	case d.granting <- struct{}{}:
		defer func() { <-d.granting }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if s, err := d.current(); s != nil || err != nil {
		return s, err
	}
	s, sent, err := d.grant(ctx)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	closed, first := d.closed, d.sess == nil
	if !closed {
		d.sess = s
		d.background(func() { d.keepAlive(s, sent.Add(s.ttl)) })
		if first {
			d.background(d.watch)
		}
	}
	d.mu.Unlock()
	if closed {
		s.end(backend.ErrClosed)
		d.revoke(s)
		return nil, backend.ErrClosed
	}
	select {
	case <-d.watching:
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-d.ctx.Done():
		return nil, backend.ErrClosed
	}
}

// current returns the Driver's live session, if it has one.
func (d *Driver) current() (*session, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, backend.ErrClosed
	}
	if d.sess != nil && !d.sess.lost() {
		return d.sess, nil
	}
	return nil, nil
}

// grant asks the cluster for a new lease, sent at sent. A request made while the cluster elects a
// leader can go unanswered, so each try is bounded and tried again while
// ctx lasts (a lease granted to a try given up expires unused).
func (d *Driver) grant(ctx context.Context) (s *session, sent time.Time, err error) {
	var resp *clientv3.LeaseGrantResponse
	for try := true; try; try = (transient(err) || errors.Is(err, context.DeadlineExceeded)) && driverkit.Sleep(ctx, 50*time.Millisecond) {
		tctx, cancel := context.WithTimeout(ctx, max(d.ttl/3, time.Second))
		sent = time.Now()
		resp, err = d.cli.Grant(tctx, int64(d.ttl/time.Second))
		cancel()
	}
	if err != nil {
		return nil, sent, d.storeErr(ctx, fmt.Errorf("grant a session lease: %w", err))
	}
	s = &session{id: resp.ID, ttl: time.Duration(resp.TTL) * time.Second}
	s.ctx, s.cancel = context.WithCancelCause(d.ctx)
	return s, sent, nil
}

// keepAlive renews s every TTL/3, and more often after a failure, until s
// ends. It keeps validUntil, a lower bound of the lease's end on the
// server: the time the last answered keepalive was sent plus the TTL the
// server granted (the server cannot have renewed it earlier than the
// request was sent). It declares s lost a fifth of the TTL before that —
// room for one slow or retried keepalive — so that an owner hears of it
// before the server can free its keys and grant the lock to someone else.
func (d *Driver) keepAlive(s *session, validUntil time.Time) {
	interval, wait := s.ttl/3, s.ttl/3
	for {
		deadline := validUntil.Add(-s.ttl / 5)
		if !driverkit.Sleep(s.ctx, min(wait, time.Until(deadline))) {
			return
		}
		if !time.Now().Before(deadline) {
			s.end(fmt.Errorf("no keepalive of the session was answered in time (TTL %v)", s.ttl))
			d.revoke(s)
			return
		}
		sent := time.Now()
		// One attempt may not outlast the interval: a stream stuck on a
		// member that lost the cluster is given up for a new one.
		kctx, cancel := context.WithDeadline(clientv3.WithRequireLeader(s.ctx), sent.Add(min(interval, time.Until(deadline))))
		resp, err := d.cli.KeepAliveOnce(kctx, s.id)
		cancel()
		switch {
		case err == nil:
			validUntil = sent.Add(time.Duration(resp.TTL) * time.Second)
			wait = interval
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.end(errLeaseExpired)
			return
		default:
			wait = max(s.ttl/20, 20*time.Millisecond)
		}
	}
}

// revoke revokes the lease of s, freeing its keys, unless the Driver
// crashed. It is bounded, and its failure harmless: the lease then expires.
func (d *Driver) revoke(s *session) {
	if d.crashed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(s.ttl, cleanupTimeout))
	defer cancel()
	_, _ = d.cli.Revoke(ctx, s.id)
}

// deleteKey deletes key if its create revision is rev. It is not an error
// that the key is gone.
func (d *Driver) deleteKey(ctx context.Context, key string, rev int64) error {
	_, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key)).
		Commit()
	return err
}

// remove deletes key, created at rev by an acquisition that failed or gave
// up (see cleanup).
func (d *Driver) remove(ctx context.Context, s *session, key string, rev int64) {
	d.cleanup(ctx, s, func(ctx context.Context) error { return d.deleteKey(ctx, key, rev) })
}

// abandon makes sure that an acquisition by owner whose outcome is unknown
// (its request failed, but may have been applied, or be applied later)
// leaves no key: in one transaction, it writes the acquisition's abort key,
// which the acquisition's put is conditioned on, and deletes the key if the
// put was applied. A put that arrives later fails its compare. The abort
// key, outside every name's range, lives as long as the session.
func (d *Driver) abandon(ctx context.Context, s *session, key, owner string) {
	abort := clientv3.OpPut(d.abortKey(owner), "", clientv3.WithLease(s.id))
	d.cleanup(ctx, s, func(ctx context.Context) error {
		_, err := d.cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(key), "=", owner)).
			Then(abort, clientv3.OpDelete(key)).Else(abort).Commit()
		return err
	})
}

func (d *Driver) abortKey(owner string) string { return d.prefix + "!aborted/" + owner }

// cleanup runs f, which deletes a key that must not outlive the call that
// made it, with a context that is not the caller's (possibly cancelled) one
// and a short bound, so that a cluster that is down cannot hang the
// caller; then, if f failed, in the background (retry).
func (d *Driver) cleanup(ctx context.Context, s *session, f func(context.Context) error) {
	if d.crashed.Load() {
		return
	}
	gctx, cancel := driverkit.Grace(ctx, cleanupTimeout)
	defer cancel()
	if f(gctx) != nil {
		d.retry(s, f)
	}
}

// retry runs f in the background until it succeeds or s ends (and its keys
// with it).
func (d *Driver) retry(s *session, f func(context.Context) error) {
	d.goBackground(func() {
		for wait := 50 * time.Millisecond; driverkit.Sleep(s.ctx, wait) && !d.crashed.Load(); wait = min(2*wait, time.Second) {
			ctx, cancel := context.WithTimeout(s.ctx, cleanupTimeout)
			err := f(ctx)
			cancel()
			if err == nil {
				return
			}
		}
	})
}
