package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/golocker/locker/backend"
)

// session is one lease of the Driver, kept alive by its own keepalive loop.
// Every key the Driver writes is attached to the current session, so that
// the keys of a Driver that dies are freed when its lease expires.
//
// The loop keeps a lower bound of the lease's end on the server:
// validUntil, the time the last answered keepalive was sent plus the TTL
// the server granted (the server cannot have renewed it earlier than the
// request was sent). The session is declared lost a margin before that, so
// that an owner hears of it before the server can free its keys and grant
// the lock to someone else.
type session struct {
	id  clientv3.LeaseID
	ttl time.Duration // granted by the server

	ctx    context.Context // ends with the session: stops its keepalive loop
	cancel context.CancelFunc
	done   chan struct{} // closed when the session ended
	once   sync.Once

	mu         sync.Mutex
	validUntil time.Time
	cause      error
	orphans    map[string]orphan // keys to delete
	cleaning   atomic.Bool       // deleteOrphans is running

	// slots are the key numbers in use, by name: see takeSlot.
	slots map[string]map[int]struct{}
}

// orphan is a key of the session that must go: a hold or waiting place
// whose deletion failed (rev is its create revision), or an acquisition
// whose outcome is unknown (abort is the key that fences it off).
type orphan struct {
	rev   int64
	abort string
}

// margin is how long before the lease's end, as the Driver can bound it,
// the session is declared lost. Keepalives are sent every TTL/3, so a fifth
// of the TTL leaves room for one slow or retried keepalive.
func margin(ttl time.Duration) time.Duration { return ttl / 5 }

func (s *session) deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.validUntil.Add(-margin(s.ttl))
}

func (s *session) extend(until time.Time) {
	s.mu.Lock()
	if until.After(s.validUntil) {
		s.validUntil = until
	}
	s.mu.Unlock()
}

func (s *session) lost() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// lostErr is the error of a hold whose session ended: ErrLost, and why.
func (s *session) lostErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Errorf("%w: %v", backend.ErrLost, s.cause)
}

// end marks the session lost, once, and stops its keepalive loop.
func (s *session) end(cause error) {
	s.once.Do(func() {
		s.mu.Lock()
		s.cause = cause
		s.mu.Unlock()
		s.cancel()
		close(s.done)
	})
}

// addOrphan records a key whose deletion failed, for the keepalive loop to
// delete.
func (s *session) addOrphan(key string, o orphan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.orphans == nil {
		s.orphans = make(map[string]orphan)
	}
	s.orphans[key] = o
}

// takeSlot returns a key number for an acquisition of name in s: the
// lowest that no other acquisition of the name uses and whose key is not
// an orphan still to delete. An owner's key is prefix/name/<lease>-<slot>,
// not one per acquisition: etcd keeps a deleted key in its index until a
// compaction, and a range over a name that had a key per acquisition grew
// slower with every one (a 15,000-pair run took 1.59x the time of
// concurrency.Mutex's, whose key is one per session). keyOf names the key
// of a slot.
func (s *session) takeSlot(name string, keyOf func(int) string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slots == nil {
		s.slots = make(map[string]map[int]struct{})
	}
	used := s.slots[name]
	if used == nil {
		used = make(map[int]struct{}, 1)
		s.slots[name] = used
	}
	for i := 0; ; i++ {
		if _, taken := used[i]; taken {
			continue
		}
		if _, orphaned := s.orphans[keyOf(i)]; orphaned {
			continue
		}
		used[i] = struct{}{}
		return i
	}
}

// putSlot gives back a slot of name once its key is deleted or recorded as
// an orphan.
func (s *session) putSlot(name string, slot int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if used := s.slots[name]; used != nil {
		delete(used, slot)
		if len(used) == 0 {
			delete(s.slots, name)
		}
	}
}

func (s *session) hasOrphans() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.orphans) > 0
}

// session returns the Driver's live session, granting a new one when there
// is none or the last one ended. Acquisitions that find no session wait for
// the one being granted rather than grant their own.
func (d *Driver) session(ctx context.Context) (*session, error) {
	for {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return nil, backend.ErrClosed
		}
		if s := d.sess; s != nil && !s.lost() {
			d.mu.Unlock()
			return s, nil
		}
		if w := d.creating; w != nil {
			d.mu.Unlock()
			select {
			case <-w:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		w := make(chan struct{})
		d.creating = w
		d.mu.Unlock()

		s, err := d.grant(ctx)

		d.mu.Lock()
		d.creating = nil
		close(w)
		if err == nil && d.closed {
			err = backend.ErrClosed
		}
		if err == nil {
			d.sess = s
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				d.keepAlive(s)
			}()
		}
		d.mu.Unlock()
		if err != nil {
			if s != nil {
				s.end(err)
				d.revoke(s)
			}
			return nil, err
		}
		return s, nil
	}
}

// grant asks the cluster for a new lease.
func (d *Driver) grant(ctx context.Context) (*session, error) {
	sent := time.Now()
	resp, err := d.cli.Grant(ctx, int64(d.ttl/time.Second))
	if err != nil {
		return nil, fmt.Errorf("etcdlock: grant a session lease: %w", ctxErr(ctx, err))
	}
	ttl := time.Duration(resp.TTL) * time.Second
	s := &session{id: resp.ID, ttl: ttl, done: make(chan struct{}), validUntil: sent.Add(ttl)}
	s.ctx, s.cancel = context.WithCancel(d.ctx)
	return s, nil
}

// keepAlive renews s every TTL/3, and more often after a failure, until s
// ends. It declares s lost when no keepalive was answered in time.
func (d *Driver) keepAlive(s *session) {
	interval := s.ttl / 3
	retry := max(s.ttl/20, 20*time.Millisecond)
	wait := interval
	for {
		deadline := s.deadline()
		t := time.NewTimer(min(wait, time.Until(deadline)))
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if !time.Now().Before(deadline) {
			s.end(fmt.Errorf("no keepalive of the session was answered in time (TTL %v)", s.ttl))
			d.revoke(s)
			return
		}
		sent := time.Now()
		// One attempt may not outlast the interval: a stream stuck on a
		// member that lost the cluster is given up for a new one.
		kctx, cancel := context.WithDeadline(clientv3.WithRequireLeader(s.ctx), minTime(deadline, sent.Add(interval)))
		resp, err := d.cli.KeepAliveOnce(kctx, s.id)
		cancel()
		switch {
		case err == nil:
			s.extend(sent.Add(time.Duration(resp.TTL) * time.Second))
			wait = interval
			if s.hasOrphans() && s.cleaning.CompareAndSwap(false, true) {
				// Not on this goroutine: a slow cluster must not delay
				// the next keepalive.
				if !d.goBackground(func() {
					defer s.cleaning.Store(false)
					d.deleteOrphans(s)
				}) {
					s.cleaning.Store(false)
				}
			}
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.end(errors.New("the session's lease expired on the server"))
			return
		default:
			wait = retry
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// deleteOrphans deletes the keys of s whose deletion failed before: a key
// left by an acquisition that gave up while the cluster was unreachable
// would otherwise block the name for as long as the session lives.
func (d *Driver) deleteOrphans(s *session) {
	s.mu.Lock()
	keys := make(map[string]orphan, len(s.orphans))
	for k, o := range s.orphans {
		keys[k] = o
	}
	s.mu.Unlock()
	for k, o := range keys {
		ctx, cancel := context.WithTimeout(s.ctx, cleanupTimeout)
		var err error
		if o.abort != "" {
			err = d.fence(ctx, s, k, o.abort)
		} else {
			err = d.deleteKey(ctx, k, o.rev)
		}
		cancel()
		if err == nil {
			s.mu.Lock()
			delete(s.orphans, k)
			s.mu.Unlock()
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
	if d.crashed.Load() {
		return nil
	}
	_, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key)).
		Commit()
	return err
}

// remove deletes the key of an acquisition that failed or gave up, with a
// context that is not the (possibly cancelled) caller's and a short bound.
// If that fails, the keepalive loop tries again while the session lives.
func (d *Driver) remove(ctx context.Context, s *session, key string, rev int64) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := d.deleteKey(cctx, key, rev); err != nil && !s.lost() {
		s.addOrphan(key, orphan{rev: rev})
	}
}

// abandon makes sure that an acquisition whose outcome is unknown (its
// request failed, but may have been applied, or be applied later) leaves no
// key: it writes the acquisition's abort key, which its put is conditioned
// on, and deletes its key, in one transaction. A put that arrives later
// fails its compare. The abort key lives as long as the session.
func (d *Driver) abandon(ctx context.Context, s *session, key, abort string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := d.fence(cctx, s, key, abort); err != nil && !s.lost() {
		s.addOrphan(key, orphan{abort: abort})
	}
}

func (d *Driver) fence(ctx context.Context, s *session, key, abort string) error {
	if d.crashed.Load() {
		return nil
	}
	_, err := d.cli.Txn(ctx).
		Then(clientv3.OpPut(abort, "", clientv3.WithLease(s.id)), clientv3.OpDelete(key)).
		Commit()
	return err
}
