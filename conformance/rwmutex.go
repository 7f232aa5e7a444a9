package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

// writerWaits starts w.Lock(ctx) and returns the channel of its outcome,
// once a reader of a new Client is refused: the writer waits in the store
// before it (probe is the name's RWMutex on that Client).
func writerWaits(t *testing.T, ctx context.Context, w, probe *locker.RWMutex) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Lock(ctx) }()
	eventually(t, quick, "a new reader refused while a writer waits", func() bool {
		ok, err := probe.TryRLock(ctx)
		if err != nil {
			t.Fatalf("TryRLock: %v", err)
		}
		if ok {
			if err := probe.RUnlock(ctx); err != nil {
				t.Fatalf("RUnlock: %v", err)
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the writer's Lock returned (%v) while a reader held the lock", err)
		default:
		}
		return !ok
	})
	return done
}

// returns waits up to d for the outcome on done.
func returns(t *testing.T, done <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
		return nil
	}
}

var rwmutexChecks = []check{
	{
		name:   "rwmutex/readers_share_and_a_writer_excludes_everyone_across_clients",
		proves: []string{CapRWMutex, CapExclusion},
		skip:   needWeighted,
		run: func(t *testing.T, s *suite) {
			const clients, perClient, rounds = 3, 3, 8
			ctx := s.ctx(t)
			name := s.name(t, "shared")
			// A writer enters with the whole limit, a reader with 1.
			const all = backend.RWLimit
			u := newUnits(all)
			var wg sync.WaitGroup
			errs := make(chan error, clients*perClient)
			for ci := range clients {
				rw := s.client(t).NewRWMutex(name)
				for g := range perClient {
					who := fmt.Sprintf("client %d goroutine %d", ci, g)
					wg.Add(1)
					go func() {
						defer wg.Done()
						// An owner of its own, so that Hold finds its hold.
						octx := locker.WithOwner(ctx)
						for i := range rounds {
							write := (g+i)%3 == 0
							var l locker.Locker = rw
							weight := int64(all)
							if !write {
								l, weight = rw.RLocker(), 1
							}
							if err := acquireSomehow(octx, l, i); err != nil {
								errs <- fmt.Errorf("%s: %w", who, err)
								return
							}
							h, _ := rw.Hold(octx)
							u.enter(who, weight, h.Token())
							time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
							u.exit(weight)
							if err := l.Unlock(octx); err != nil {
								errs <- fmt.Errorf("%s: Unlock: %w", who, err)
								return
							}
						}
					}()
				}
			}
			within(t, s.h.Timeout, "the contending goroutines", wg.Wait)
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			u.check(t, clients*perClient*rounds)
			// Two readers of two Clients at once.
			a, b := s.client(t).NewRWMutex(name), s.client(t).NewRWMutex(name)
			if err := a.RLock(ctx); err != nil {
				t.Fatalf("RLock: %v", err)
			}
			if ok, err := b.TryRLock(ctx); !ok || err != nil {
				t.Errorf("a second reader's TryRLock = %v, %v; want true: readers share", ok, err)
			} else if err := b.RUnlock(ctx); err != nil {
				t.Errorf("RUnlock: %v", err)
			}
			if ok, err := b.TryLock(ctx); ok || err != nil {
				t.Errorf("a writer's TryLock beside a reader = %v, %v; want false", ok, err)
			}
			if err := a.RUnlock(ctx); err != nil {
				t.Fatalf("RUnlock: %v", err)
			}
		},
	},
	{
		name:   "rwmutex/a_waiting_writer_keeps_new_readers_out_and_gets_in_when_the_readers_leave",
		proves: []string{CapRWMutex},
		skip:   needWeighted,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			r := s.client(t).NewRWMutex(name)
			if err := r.RLock(ctx); err != nil {
				t.Fatalf("RLock: %v", err)
			}
			w := s.client(t).NewRWMutex(name)
			done := writerWaits(t, ctx, w, s.client(t).NewRWMutex(name))
			if err := r.RUnlock(ctx); err != nil {
				t.Fatalf("RUnlock: %v", err)
			}
			if err := returns(t, done, quick, "the writer's Lock after the reader left"); err != nil {
				t.Fatalf("the writer's Lock: %v", err)
			}
			if err := w.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
		},
	},
	{
		name:   "rwmutex/a_writer_that_gives_up_lets_readers_in_at_once",
		proves: []string{CapRWMutex, CapCancellation},
		skip:   needWeighted,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			r := s.client(t).NewRWMutex(name)
			if err := r.RLock(ctx); err != nil {
				t.Fatalf("RLock: %v", err)
			}
			t.Cleanup(func() { _ = r.RUnlock(ctx) })
			// A long lease: a place left behind would outlast the check.
			w := s.client(t).NewRWMutex(name, locker.WithTTL(30*time.Second))
			wctx, cancel := context.WithCancel(ctx)
			done := writerWaits(t, wctx, w, s.client(t).NewRWMutex(name))
			cancel()
			if err := returns(t, done, quick, "the cancelled writer's Lock"); !errors.Is(err, context.Canceled) {
				t.Fatalf("the cancelled writer's Lock = %v, want context.Canceled", err)
			}
			reader := s.client(t).NewRWMutex(name)
			within(t, quick, "a reader after the writer gave up", func() {
				if ok, err := reader.TryRLock(ctx); !ok || err != nil {
					t.Errorf("TryRLock right after the waiting writer gave up = %v, %v; want true: its place still keeps readers out", ok, err)
				} else if err := reader.RUnlock(ctx); err != nil {
					t.Errorf("RUnlock: %v", err)
				}
			})
		},
	},
	{
		name:   "rwmutex/a_downgrade_keeps_a_queued_writer_out_and_the_read_hold_is_renewed",
		proves: []string{CapRWMutex, CapRenewal},
		skip:   needWeighted,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			o := locker.WithOwner(ctx)
			a := s.client(t).NewRWMutex(name)
			if err := a.Lock(o); err != nil {
				t.Fatalf("Lock: %v", err)
			}
			h, _ := a.Hold(o)
			w := s.client(t).NewRWMutex(name)
			done := make(chan error, 1)
			go func() { done <- w.Lock(ctx) }()
			s.awaitWaiters(t, ctx, name, 1)
			if err := a.Downgrade(o); err != nil {
				t.Fatalf("Downgrade: %v", err)
			}
			if h2, _ := a.Hold(o); h2.Token() != h.Token() {
				t.Errorf("the token changed from %d to %d at the downgrade", h.Token(), h2.Token())
			}
			// The writer waits in the store once new readers are refused.
			probe := s.client(t).NewRWMutex(name)
			eventually(t, quick, "a new reader refused while the writer waits", func() bool {
				select {
				case err := <-done:
					t.Fatalf("the queued writer got in (%v) beside the downgraded hold", err)
				default:
				}
				ok, err := probe.TryRLock(ctx)
				if err != nil {
					t.Fatalf("TryRLock: %v", err)
				}
				if ok {
					if err := probe.RUnlock(ctx); err != nil {
						t.Fatalf("RUnlock: %v", err)
					}
				}
				return !ok
			})
			// The read hold lives on, renewed, for three leases, and the
			// writer stays out.
			end := time.Now().Add(3 * s.ttl)
			for time.Now().Before(end) {
				select {
				case err := <-done:
					t.Fatalf("the queued writer got in (%v) while the downgraded read hold lasted", err)
				case <-h.Lost():
					t.Fatalf("the downgraded read hold was lost: %v", h.Err())
				case <-time.After(s.ttl / 5):
				}
			}
			if err := a.RUnlock(o); err != nil {
				t.Fatalf("RUnlock after the downgrade: %v", err)
			}
			if err := returns(t, done, quick, "the writer's Lock after the downgraded hold ended"); err != nil {
				t.Fatalf("the writer's Lock: %v", err)
			}
			if err := w.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
		},
	},
	{
		name:   "rwmutex/read_holds_are_renewed_well_past_the_ttl",
		proves: []string{CapRWMutex, CapRenewal},
		skip:   needWeighted,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			a := s.client(t).NewRWMutex(name)
			o := locker.WithOwner(ctx)
			if err := a.RLock(o); err != nil {
				t.Fatalf("RLock: %v", err)
			}
			h, _ := a.Hold(o)
			w := s.client(t).NewRWMutex(name)
			end := time.Now().Add(3*s.ttl + s.ttl/2)
			for time.Now().Before(end) {
				if ok, err := w.TryLock(ctx); ok || err != nil {
					t.Fatalf("a writer's TryLock during a read hold = %v, %v; the read hold was not renewed", ok, err)
				}
				select {
				case <-h.Lost():
					t.Fatalf("the read hold was lost: %v", h.Err())
				case <-time.After(s.ttl / 5):
				}
			}
			if err := a.RUnlock(o); err != nil {
				t.Fatalf("RUnlock: %v", err)
			}
			if ok, err := w.TryLock(ctx); !ok || err != nil {
				t.Errorf("TryLock after the reader left = %v, %v", ok, err)
			} else if err := w.Unlock(ctx); err != nil {
				t.Error(err)
			}
		},
	},
	{
		name:   "rwmutex/an_upgrade_fails_at_once",
		proves: []string{CapRWMutex, CapOwnership},
		skip:   needWeighted,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			a := s.client(t).NewRWMutex(name)
			o := locker.WithOwner(ctx)
			if err := a.RLock(o); err != nil {
				t.Fatalf("RLock: %v", err)
			}
			within(t, quick, "Lock by an owner that holds a read hold", func() {
				if err := a.Lock(o); !errors.Is(err, locker.ErrUpgrade) {
					t.Errorf("Lock by a reader = %v, want ErrUpgrade", err)
				}
				if ok, err := a.TryLock(o); ok || !errors.Is(err, locker.ErrUpgrade) {
					t.Errorf("TryLock by a reader = %v, %v; want ErrUpgrade", ok, err)
				}
			})
			if err := a.RUnlock(o); err != nil {
				t.Fatalf("RUnlock: %v", err)
			}
			// Write first, then read and downgrade: allowed.
			if err := a.Lock(o); err != nil {
				t.Fatalf("Lock: %v", err)
			}
			if err := a.RLock(o); err != nil {
				t.Fatalf("RLock by the writer: %v", err)
			}
			if err := a.Unlock(o); err != nil {
				t.Fatalf("Unlock of the write level: %v", err)
			}
			if !s.rfree(t, ctx, name) {
				t.Error("a reader is refused after the writer unlocked its write level and kept a read level")
			}
			if err := a.RUnlock(o); err != nil {
				t.Fatalf("RUnlock: %v", err)
			}
		},
	},
	{
		name:   "kinds/a_mutex_a_semaphore_and_a_read_write_lock_of_one_name_are_three_locks",
		proves: []string{CapRWMutex, CapSemaphore, CapExclusion},
		skip:   needWeighted,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			m := locked(t, ctx, s.client(t), name)
			rw := s.client(t).NewRWMutex(name)
			if ok, err := rw.TryLock(ctx); !ok || err != nil {
				t.Fatalf("the RWMutex's TryLock beside the Mutex of the same name = %v, %v; want true", ok, err)
			}
			sem := s.client(t).NewSemaphore(name, 1)
			p, err := sem.TryAcquire(ctx, 1)
			if p == nil || err != nil {
				t.Fatalf("the Semaphore's TryAcquire beside the Mutex and RWMutex of the same name = %v, %v; want a permit", p, err)
			}
			// Each is still exclusive in its own kind.
			if s.free(t, ctx, s.client(t), name) {
				t.Error("the Mutex was free although held")
			}
			if s.rfree(t, ctx, name) {
				t.Error("the RWMutex let a reader in beside its writer")
			}
			if s.tryPermits(t, ctx, name, 1, 1) {
				t.Error("the Semaphore granted a second permit of 1")
			}
			mustRelease(t, ctx, p)
			if err := rw.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			mustUnlock(t, ctx, m)
		},
	},
}

// rfree reports whether a new Client can take a read hold on name at once
// (and gives it back).
func (s *suite) rfree(t *testing.T, ctx context.Context, name string) bool {
	t.Helper()
	rw := s.client(t).NewRWMutex(name)
	ok, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatalf("TryRLock(%s): %v", name, err)
	}
	if ok {
		if err := rw.RUnlock(ctx); err != nil {
			t.Fatalf("RUnlock(%s): %v", name, err)
		}
	}
	return ok
}
