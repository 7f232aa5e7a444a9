package conformance

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

var ownershipChecks = []check{
	{
		name:   "ownership/a_handle_shared_by_goroutines_excludes_them",
		proves: []string{CapOwnership, CapExclusion},
		run: func(t *testing.T, s *suite) {
			const goroutines, rounds = 6, 15
			ctx, name := s.start(t)
			m := s.client(t).NewMutex(name)
			res := &resource{fencing: s.caps.Fencing}
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						if err := m.Lock(ctx); err != nil {
							t.Errorf("goroutine %d: Lock: %v", g, err)
							return
						}
						res.enter("a goroutine", m.Token())
						time.Sleep(100 * time.Microsecond)
						res.exit()
						if err := m.Unlock(ctx); err != nil {
							t.Errorf("goroutine %d: Unlock: %v", g, err)
							return
						}
					}
				}()
			}
			within(t, s.h.Timeout, "goroutines sharing a handle", wg.Wait)
			res.check(t, goroutines*rounds)
			if n := m.HoldCount(); n != 0 {
				t.Errorf("HoldCount = %d after balanced Lock/Unlock, want 0", n)
			}
			if !s.free(t, ctx, s.client(t), name) {
				t.Error("the lock is held after balanced Lock/Unlock from several goroutines")
			}
		},
	},
	{
		name:   "ownership/a_second_lock_from_a_ctx_without_an_owner_waits",
		proves: []string{CapOwnership, CapExclusion},
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			m := s.client(t).NewMutex(s.name(t, "l"))
			mustLock(t, ctx, m)
			if ok, err := m.TryLock(ctx); ok || err != nil {
				t.Errorf("a second TryLock of the same handle = %v, %v; want false, nil", ok, err)
			}
			const wait = 150 * time.Millisecond
			start := time.Now()
			if ok, err := m.LockTimeout(ctx, wait); ok || err != nil {
				t.Errorf("a second LockTimeout of the same handle = %v, %v; want false, nil", ok, err)
			}
			if el := time.Since(start); el < wait-10*time.Millisecond {
				t.Errorf("the second LockTimeout gave up after %v, before its %v", el, wait)
			}
			if n := m.HoldCount(); n != 1 {
				t.Errorf("HoldCount = %d, want 1", n)
			}
			mustUnlock(t, ctx, m)
		},
	},
	{
		name:   "reentrancy/through_the_ctx_keeps_the_token_and_frees_after_the_last_unlock",
		proves: []string{CapReentrancy, CapOwnership},
		run: func(t *testing.T, s *suite) {
			ctx := locker.WithOwner(s.ctx(t))
			name := s.name(t, "l")
			other := s.client(t)
			c := s.client(t)
			m := locked(t, ctx, c, name)
			tok := m.Token()
			mustLock(t, ctx, c.NewMutex(name)) // another handle of the name: the same lock
			if ok, err := m.TryLock(ctx); !ok || err != nil {
				t.Fatalf("TryLock by the owner = %v, %v; want true", ok, err)
			}
			if ok, err := m.LockTimeout(ctx, 0); !ok || err != nil {
				t.Fatalf("LockTimeout by the owner = %v, %v; want true", ok, err)
			}
			if n := m.HoldCount(); n != 4 {
				t.Fatalf("HoldCount = %d, want 4", n)
			}
			if m.Token() != tok {
				t.Errorf("Token changed on re-entry: %d, then %d", tok, m.Token())
			}
			for want := 3; want >= 1; want-- {
				mustUnlock(t, ctx, m)
				if n := m.HoldCount(); n != want {
					t.Fatalf("HoldCount = %d, want %d", n, want)
				}
				if s.free(t, ctx, other, name) {
					t.Fatalf("the lock was freed with %d levels still held", want)
				}
			}
			mustUnlock(t, ctx, m)
			if !s.free(t, ctx, other, name) {
				t.Error("the lock is not free after the last Unlock")
			}
			if err := m.Unlock(ctx); !errors.Is(err, locker.ErrNotHeld) {
				t.Errorf("one Unlock too many = %v, want ErrNotHeld", err)
			}
		},
	},
	{
		name:   "reentrancy/do_passes_its_hold_down_the_call_chain",
		proves: []string{CapReentrancy, CapOwnership},
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			m := s.client(t).NewMutex(name)
			other := s.client(t)
			err := locker.Do(ctx, m, func(ctx context.Context) error {
				h, ok := locker.HoldFromContext(ctx)
				if !ok || h.Name() != name || h.Token() != m.Token() || h.Err() != nil {
					t.Errorf("HoldFromContext = %v (%q, token %d, %v); want the hold on %q with token %d", ok, h.Name(), h.Token(), h.Err(), name, m.Token())
				}
				return locker.Do(ctx, m, func(ctx context.Context) error {
					if n := m.HoldCount(); n != 2 {
						t.Errorf("HoldCount in a nested Do = %d, want 2", n)
					}
					if inner, _ := locker.HoldFromContext(ctx); inner.Token() != h.Token() {
						t.Errorf("the nested Do's token %d differs from the outer %d", inner.Token(), h.Token())
					}
					if err := m.Unlock(context.Background()); !errors.Is(err, locker.ErrNotHeld) {
						t.Errorf("Unlock from a ctx that does not carry the hold = %v, want ErrNotHeld", err)
					}
					return nil
				})
			})
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if !s.free(t, ctx, other, name) {
				t.Error("the lock is held after Do returned")
			}
		},
	},
	{
		name:   "unlock/from_a_ctx_that_does_not_own_the_hold_is_ErrNotHeld",
		proves: []string{CapOwnership, CapExclusion},
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			c := s.client(t)
			other := s.client(t)
			m := c.NewMutex(name)

			owner := locker.WithOwner(ctx)
			mustLock(t, owner, m)
			for what, uctx := range map[string]context.Context{"another owner": locker.WithOwner(ctx), "no owner": ctx} {
				if err := m.Unlock(uctx); !errors.Is(err, locker.ErrNotHeld) {
					t.Errorf("Unlock from a ctx with %s = %v, want ErrNotHeld", what, err)
				}
			}
			if s.free(t, ctx, other, name) {
				t.Fatal("an Unlock by a non-owner freed the lock")
			}
			mustUnlock(t, owner, m)

			// Without an owner, the hold is the handle's: any ctx without
			// an owner unlocks it, as with sync.Mutex; one with another
			// owner does not.
			mustLock(t, ctx, m)
			if err := m.Unlock(locker.WithOwner(ctx)); !errors.Is(err, locker.ErrNotHeld) {
				t.Errorf("Unlock of a hold taken without an owner, from a ctx with one = %v, want ErrNotHeld", err)
			}
			if err := c.NewMutex(name).Unlock(ctx); !errors.Is(err, locker.ErrNotHeld) {
				t.Errorf("Unlock through another handle = %v, want ErrNotHeld", err)
			}
			mustUnlock(t, context.Background(), m)

			// A handle that holds nothing.
			holder := locked(t, ctx, other, name)
			defer mustUnlock(t, ctx, holder)
			if err := m.Unlock(ctx); !errors.Is(err, locker.ErrNotHeld) {
				t.Errorf("Unlock of a lock held by another client = %v, want ErrNotHeld", err)
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
			ctx, name := s.start(t)
			a, _ := s.staleHolder(t, ctx, name)
			s.takeOver(t, ctx, a, 10*s.ttl+quick, "the first owner's hold is stale")
			s.staleUnlock(t, ctx, a, "the stale owner")
		},
	},
	{
		name:   "spi/stale_renew_and_release_are_refused",
		proves: []string{CapExclusion, CapExpiry},
		skip:   needStale,
		run: func(t *testing.T, s *suite) {
			da, db := s.driver(t), s.driver(t)
			defer da.Close()
			defer db.Close()
			staleOwners(t, s, da, db)
		},
	},
	{
		name:   "spi/a_stale_owner_on_the_same_driver_never_frees_the_next_owners_lock",
		proves: []string{CapExclusion, CapExpiry},
		skip:   needStale,
		run: func(t *testing.T, s *suite) {
			// One driver, one session: the stale owner and the next one
			// share it, as two handles of one process do.
			d := s.driver(t)
			defer d.Close()
			staleOwners(t, s, d, d)
		},
	},
}

// staleOwners makes a hold of da stale, has db take the lock, and checks
// that the stale lease's Renew and Release are refused and free nothing.
func staleOwners(t *testing.T, s *suite, da, db backend.Driver) {
	t.Helper()
	ctx, name := s.start(t)
	la, err := da.Acquire(ctx, backend.Request{Name: name, Owner: s.id + "-a", TTL: s.ttl})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	// A session-lease driver may ignore Request.TTL: its hold ends only
	// when dropped.
	if !s.caps.Expiry || s.caps.SessionLease {
		s.drop(t, ctx, name)
	}
	lctx, cancel := context.WithTimeout(ctx, 10*s.ttl+quick)
	lb, err := acquireWaiting(lctx, db, backend.Request{Name: name, Owner: s.id + "-b", TTL: 30 * time.Second})
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
}

// acquireWaiting takes r at the SPI, waiting as package locker would: the
// driver's native wait, or attempts until ctx ends (also when the native
// wait cannot wait now and answers ErrHeld).
func acquireWaiting(ctx context.Context, d backend.Driver, r backend.Request) (backend.Lease, error) {
	attempt := d.Acquire
	if w, ok := d.(backend.Waiter); ok {
		attempt = w.AcquireWait
	}
	for {
		l, err := attempt(ctx, r)
		if err == nil || !errors.Is(err, backend.ErrHeld) {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func needStale(s *suite) string {
	if s.caps.Expiry && !s.caps.SessionLease {
		return ""
	}
	return needDrop(s)
}

// staleHolder locks name with a fixed lease and ends that hold behind its
// owner's back (makeStale). It returns the stale holder and the token it
// held.
func (s *suite) staleHolder(t *testing.T, ctx context.Context, name string) (*locker.Mutex, uint64) {
	t.Helper()
	a := locked(t, ctx, s.client(t), name, locker.WithFixedLease())
	tok := a.Token()
	s.makeStale(t, ctx, name, a.Lost())
	return a, tok
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
