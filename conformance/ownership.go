package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

var ownershipChecks = []check{
	{
		name:   "unlock/of_a_handle_that_holds_nothing_is_ErrNotHeld",
		proves: []string{CapExclusion},
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			name := s.name(t, "l")
			c := s.client(t)
			holder := s.client(t).NewMutex(name)
			mustLock(t, ctx, holder)
			defer mustUnlock(t, ctx, holder)
			m := c.NewMutex(name)
			if err := m.Unlock(ctx); !errors.Is(err, locker.ErrNotHeld) {
				t.Errorf("Unlock of a lock held by another handle = %v, want ErrNotHeld", err)
			}
			if s.free(t, ctx, c, name) {
				t.Error("Unlock by a non-owner freed the lock")
			}
		},
	},
	{
		name:   "unlock/by_a_stale_owner_never_frees_the_next_owners_lock",
		proves: []string{CapExclusion, CapExpiry},
		skip:   needStale,
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			name := s.name(t, "l")
			a := s.client(t).NewMutex(name, locker.WithFixedLease())
			mustLock(t, ctx, a)
			s.makeStale(t, ctx, name, a.Lost())
			b := s.client(t).NewMutex(name)
			if ok, err := b.LockTimeout(ctx, 10*s.ttl+quick); !ok || err != nil {
				t.Fatalf("the next owner's LockTimeout = %v, %v; want true", ok, err)
			}
			defer mustUnlock(t, ctx, b)
			if err := a.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
				t.Errorf("the stale owner's Unlock = %v, want ErrLost", err)
			}
			if s.free(t, ctx, s.client(t), name) {
				t.Error("the stale owner's Unlock freed the next owner's lock")
			}
		},
	},
	{
		name:   "spi/stale_renew_and_release_are_refused",
		proves: []string{CapExclusion, CapExpiry},
		skip:   needStale,
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			name := s.name(t, "l")
			da, db := s.driver(t), s.driver(t)
			defer da.Close()
			defer db.Close()
			la, err := da.Acquire(ctx, backend.Request{Name: name, Owner: s.id + "-a", TTL: s.ttl})
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			// A session-lease driver may ignore Request.TTL: its hold
			// ends only when dropped.
			if !s.caps.Expiry || s.caps.SessionLease {
				s.drop(t, ctx, name)
			}
			lctx, cancel := context.WithTimeout(ctx, 10*s.ttl+quick)
			lb, err := db.Acquire(lctx, backend.Request{Name: name, Owner: s.id + "-b", TTL: 30 * time.Second, Wait: true})
			cancel()
			if err != nil {
				t.Fatalf("the next owner's Acquire: %v", err)
			}
			defer lb.Release(ctx)
			if err := la.Renew(ctx, s.ttl); !errors.Is(err, backend.ErrLost) {
				t.Errorf("the stale owner's Renew = %v, want ErrLost", err)
			}
			if err := la.Release(ctx); !errors.Is(err, backend.ErrLost) {
				t.Errorf("the stale owner's Release = %v, want ErrLost", err)
			}
			if s.free(t, ctx, s.client(t), name) {
				t.Error("the stale owner's Renew or Release freed the next owner's lock")
			}
			if err := lb.Renew(ctx, 30*time.Second); err != nil {
				t.Errorf("the owner's Renew after the stale calls: %v", err)
			}
		},
	},
}

func needStale(s *suite) string {
	if s.caps.Expiry && !s.caps.SessionLease {
		return ""
	}
	return needDrop(s)
}

// makeStale ends the hold on name behind its owner's back: by letting its
// fixed lease run out, or by dropping it on the store.
func (s *suite) makeStale(t *testing.T, ctx context.Context, name string, lost <-chan struct{}) {
	t.Helper()
	if !s.caps.Expiry {
		s.drop(t, ctx, name)
	}
	select {
	case <-lost:
	case <-time.After(10*s.ttl + quick):
		t.Fatal("the hold was not reported lost")
	}
}
