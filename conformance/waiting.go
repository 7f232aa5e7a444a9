package conformance

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

// quick bounds calls that must not wait for another owner: generous for a
// loaded CI machine talking to a remote store, far below the leases used.
const quick = 3 * time.Second

// heldElsewhere returns the check's ctx and lock name, the lock held
// through one Client until the check ends, and a Mutex of it on another.
func (s *suite) heldElsewhere(t *testing.T) (context.Context, string, *locker.Mutex) {
	t.Helper()
	ctx, name := s.start(t)
	a := locked(t, ctx, s.client(t), name)
	t.Cleanup(func() { mustUnlock(t, ctx, a) })
	return ctx, name, s.client(t).NewMutex(name)
}

var waitingChecks = []check{
	{
		name:   "trylock/returns_at_once_when_held_elsewhere",
		proves: []string{CapExclusion},
		run: func(t *testing.T, s *suite) {
			ctx, name, b := s.heldElsewhere(t)
			within(t, quick, "TryLock on a lock held elsewhere", func() {
				ok, err := b.TryLock(ctx)
				if err != nil || ok {
					t.Errorf("TryLock = %v, %v; want false, nil", ok, err)
				}
			})
			// Also at the SPI: Acquire is ErrHeld, not a wait.
			d := s.driver(t)
			defer d.Close()
			within(t, quick, "Acquire on a held lock", func() {
				if _, err := d.Acquire(ctx, backend.Request{Name: name, Owner: s.id + "-spi", TTL: s.ttl}); !errors.Is(err, backend.ErrHeld) {
					t.Errorf("Acquire = %v, want ErrHeld", err)
				}
			})
		},
	},
	{
		name:   "spi/acquire_is_one_attempt_that_remembers_nothing",
		proves: []string{CapDeclaration},
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			a := locked(t, ctx, s.client(t), name)
			// Waiting is package locker's: each Acquire asks the store,
			// answers with what it found, and keeps nothing for the next
			// call, which is a new attempt with the same request.
			d, f := s.faulty(t)
			defer d.Close()
			counter, counts := f.(Counter)
			r := backend.Request{Name: name, Owner: s.id + "-attempts", TTL: s.ttl}
			for i := range 5 {
				var before int64
				if counts {
					before = counter.Requests()
				}
				var err error
				within(t, quick, "Acquire on a held lock", func() {
					var l backend.Lease
					if l, err = d.Acquire(ctx, r); err == nil {
						_ = l.Release(ctx)
					}
				})
				if !errors.Is(err, backend.ErrHeld) {
					t.Fatalf("attempt %d on a held lock = %v, want ErrHeld", i, err)
				}
				if counts && counter.Requests() == before {
					t.Errorf("attempt %d sent nothing to the store: it was answered from memory", i)
				}
			}
			mustUnlock(t, ctx, a)
			within(t, quick, "Acquire after the release", func() {
				l, err := d.Acquire(ctx, r)
				if err != nil {
					t.Errorf("the same request after the holder released = %v; want the lock: one attempt on a free lock takes it", err)
					return
				}
				if err := l.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
				}
			})
		},
	},
	{
		name:   "locktimeout/gives_up_after_about_its_timeout",
		proves: []string{CapExclusion},
		run: func(t *testing.T, s *suite) {
			ctx, _, b := s.heldElsewhere(t)
			const wait = 300 * time.Millisecond
			within(t, wait+quick, "LockTimeout", func() {
				start := time.Now()
				ok, err := b.LockTimeout(ctx, wait)
				el := time.Since(start)
				if err != nil || ok {
					t.Errorf("LockTimeout = %v, %v; want false, nil", ok, err)
				}
				if el < wait-10*time.Millisecond {
					t.Errorf("LockTimeout gave up after %v, before its timeout %v", el, wait)
				}
			})
		},
	},
	{
		name:   "locktimeout/gets_a_lock_released_within_the_timeout",
		proves: []string{CapExclusion},
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			a := locked(t, ctx, s.client(t), name)
			time.AfterFunc(100*time.Millisecond, func() { _ = a.Unlock(ctx) })
			b := s.client(t).NewMutex(name)
			ok, err := b.LockTimeout(ctx, 20*time.Second)
			if err != nil || !ok {
				t.Fatalf("LockTimeout = %v, %v; want true, nil", ok, err)
			}
			mustUnlock(t, ctx, b)
		},
	},
	{
		name:   "lock/returns_the_ctx_error_and_leaves_nothing_behind",
		proves: []string{CapCancellation},
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			a := locked(t, ctx, s.client(t), name)
			bc := s.client(t)
			for _, cause := range []error{context.Canceled, context.DeadlineExceeded} {
				cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				if cause == context.Canceled {
					time.AfterFunc(100*time.Millisecond, cancel)
				}
				within(t, quick, "Lock after its ctx ended", func() {
					if err := bc.NewMutex(name).Lock(cctx); !errors.Is(err, cause) {
						t.Errorf("Lock = %v, want %v", err, cause)
					}
				})
				cancel()
			}
			mustUnlock(t, ctx, a)
			// A waiter that gave up must not be granted the lock later.
			if !s.free(t, ctx, s.client(t), name) {
				t.Error("after the holder released, a waiter that had given up still blocks the lock")
			}
			if n, ok := s.waiters(t, ctx, name); ok && n != 0 {
				t.Errorf("Waiters = %d; want 0 after every waiter gave up", n)
			}
		},
	},
	{
		name:   "lock/an_abandoned_wait_leaves_nothing_in_the_store_or_the_process",
		proves: []string{CapCancellation},
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			probe := s.client(t)
			s.openProbe(t)
			ac := s.client(t)
			a := locked(t, ctx, ac, name)
			bc := s.client(t)
			// Warm the waiting client up, so that what it keeps for its
			// life (connections, a subscription that its first wait
			// opens) is counted before: it waits once, on another name.
			warmName := s.name(t, "warm")
			warm := ac.NewMutex(warmName)
			mustLock(t, ctx, warm)
			if ok, err := bc.NewMutex(warmName).LockTimeout(ctx, 100*time.Millisecond); ok || err != nil {
				t.Fatalf("LockTimeout of a held lock = %v, %v; want false, nil", ok, err)
			}
			mustUnlock(t, ctx, warm)
			before := goroutines()
			wctx, cancel := context.WithCancel(ctx)
			got := make(chan error, 1)
			go func() { got <- bc.NewMutex(name).Lock(wctx) }()
			s.awaitWaiters(t, ctx, name, 1)
			cancel()
			within(t, quick, "a Lock whose ctx was cancelled", func() {
				if err := <-got; !errors.Is(err, context.Canceled) {
					t.Errorf("Lock = %v, want context.Canceled", err)
				}
			})
			settleGoroutines(t, before, "the abandoned wait's goroutines")
			if n, ok := s.waiters(t, ctx, name); ok && n != 0 {
				t.Errorf("the store counts %d waiter(s) after the only one gave up", n)
			}
			mustUnlock(t, ctx, a)
			// The store must not hand the lock to the abandoned wait: the
			// lock is free now, and stays free.
			for i := range 3 {
				if !s.free(t, ctx, probe, name) {
					t.Fatalf("probe %d: the lock is held after its holder released and its only waiter gave up", i)
				}
				if hs, ok := s.holds(t, ctx, name); ok && len(hs) != 0 {
					t.Fatalf("probe %d: the store lists %v on a lock nobody holds", i, hs)
				}
				time.Sleep(s.ttl / 3)
			}
		},
	},
	{
		name:   "lock/without_a_deadline_waits_as_long_as_the_holder_holds",
		proves: []string{CapExclusion, CapRenewal},
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			a := locked(t, ctx, s.client(t), name)
			// No deadline: only a cancel, for the check's own end.
			wctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make(chan error, 1)
			b := s.client(t).NewMutex(name)
			go func() { got <- b.Lock(wctx) }()
			hold := 4*max(s.ttl, s.h.SessionTTL) + s.ttl/2
			select {
			case err := <-got:
				t.Fatalf("Lock with no deadline returned %v while the holder still held the lock", err)
			case <-time.After(hold):
			}
			mustUnlock(t, ctx, a)
			within(t, s.settle(), "the waiter after the release", func() {
				if err := <-got; err != nil {
					t.Errorf("Lock = %v, want nil once the holder released", err)
				}
			})
			mustUnlock(t, ctx, b)
		},
	},
	{
		name:   "lock/short_deadlines_racing_the_request_leave_the_lock_free",
		proves: []string{CapCancellation},
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			c := s.client(t, locker.WithTTL(60*time.Second))
			probe := s.client(t)
			// Deadlines from nothing to a few round trips: some end
			// before the request is sent, some while it is in flight,
			// some after the reply.
			for i := range 60 {
				d := time.Duration(i%20) * 250 * time.Microsecond
				dctx, cancel := context.WithTimeout(ctx, d)
				m := c.NewMutex(name)
				ok, err := m.TryLock(dctx)
				cancel()
				if ok {
					mustUnlock(t, ctx, m)
				} else if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("TryLock with a %v deadline = %v, want nil or DeadlineExceeded", d, err)
				}
				if !s.free(t, ctx, probe, name) {
					t.Fatalf("after a TryLock with a %v deadline (%v, %v), the lock is held by nobody", d, ok, err)
				}
			}
		},
	},
	{
		name:   "lock/with_an_ended_ctx_holds_nothing",
		proves: []string{CapCancellation},
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			done, cancel := context.WithCancel(ctx)
			cancel()
			m := s.client(t).NewMutex(name)
			if err := m.Lock(done); !errors.Is(err, context.Canceled) {
				t.Errorf("Lock(cancelled ctx) = %v, want context.Canceled", err)
			}
			if ok, err := m.TryLock(done); ok || !errors.Is(err, context.Canceled) {
				t.Errorf("TryLock(cancelled ctx) = %v, %v; want false, context.Canceled", ok, err)
			}
			if m.HoldCount() != 0 {
				t.Errorf("HoldCount = %d after failed locks", m.HoldCount())
			}
			if !s.free(t, ctx, s.client(t), name) {
				t.Error("a Lock with a cancelled ctx left the lock held")
			}
		},
	},
	{
		name:   "lock/cancellation_racing_a_grant_leaks_nothing",
		proves: []string{CapCancellation},
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			ac, bc, probe := s.client(t), s.client(t), s.client(t)
			for i := range 25 {
				a := locked(t, ctx, ac, name)
				b := bc.NewMutex(name)
				bctx, cancel := context.WithCancel(ctx)
				got := make(chan error, 1)
				go func() { got <- b.Lock(bctx) }()
				// Release and cancel close together, in either order.
				d := time.Duration(rand.IntN(3000)) * time.Microsecond
				if i%2 == 0 {
					time.AfterFunc(d, cancel)
					mustUnlock(t, ctx, a)
				} else {
					mustUnlock(t, ctx, a)
					time.AfterFunc(d, cancel)
				}
				var err error
				within(t, quick+s.ttl, "Lock racing its cancellation", func() { err = <-got })
				cancel()
				switch {
				case err == nil:
					mustUnlock(t, ctx, b)
				case !errors.Is(err, context.Canceled):
					t.Fatalf("round %d: Lock = %v, want nil or context.Canceled", i, err)
				case b.HoldCount() != 0:
					t.Fatalf("round %d: Lock failed but HoldCount = %d", i, b.HoldCount())
				}
				if !s.free(t, ctx, probe, name) {
					t.Fatalf("round %d: the lock is held after the racing Lock returned %v", i, err)
				}
			}
		},
	},
}
