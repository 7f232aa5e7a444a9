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

// acquirePermits takes n permits of sem with Acquire, TryAcquire in a loop
// or AcquireTimeout in a loop, by round.
func acquirePermits(ctx context.Context, sem *locker.Semaphore, n, round int) (*locker.Permit, error) {
	for {
		var p *locker.Permit
		var err error
		switch round % 3 {
		case 0:
			return sem.Acquire(ctx, n)
		case 1:
			p, err = sem.AcquireTimeout(ctx, n, 50*time.Millisecond)
		default:
			p, err = sem.TryAcquire(ctx, n)
			if p == nil && err == nil {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(time.Millisecond):
				}
			}
		}
		if p != nil || err != nil {
			return p, err
		}
	}
}

// mustAcquire takes n permits of sem or fails the check.
func mustAcquire(t *testing.T, ctx context.Context, sem *locker.Semaphore, n int) *locker.Permit {
	t.Helper()
	p, err := sem.Acquire(ctx, n)
	if err != nil {
		t.Fatalf("Acquire(%d) of %s: %v", n, sem.Name(), err)
	}
	return p
}

// mustRelease releases p or fails the check.
func mustRelease(t *testing.T, ctx context.Context, p *locker.Permit) {
	t.Helper()
	if err := p.Release(ctx); err != nil {
		t.Fatalf("Release of %d permits of %s: %v", p.Count(), p.Name(), err)
	}
}

// tryPermits reports whether n permits of name, with limit, can be taken
// at once by a new Client (and gives them back).
func (s *suite) tryPermits(t *testing.T, ctx context.Context, name string, limit, n int) bool {
	t.Helper()
	p, err := s.client(t).NewSemaphore(name, limit).TryAcquire(ctx, n)
	if err != nil {
		t.Fatalf("TryAcquire(%d) of %s: %v", n, name, err)
	}
	if p != nil {
		mustRelease(t, ctx, p)
	}
	return p != nil
}

var semaphoreChecks = []check{
	{
		name:   "semaphore/never_more_permits_than_the_limit_across_clients_and_goroutines",
		proves: []string{CapSemaphore, CapFencing},
		skip:   needWeighted,
		run: func(t *testing.T, s *suite) {
			const limit, clients, perClient, rounds = 3, 3, 3, 8
			ctx := s.ctx(t)
			name := s.name(t, "shared")
			u := newUnits(limit)
			var wg sync.WaitGroup
			errs := make(chan error, clients*perClient)
			for ci := range clients {
				c := s.client(t)
				sem := c.NewSemaphore(name, limit)
				for g := range perClient {
					who := fmt.Sprintf("client %d goroutine %d", ci, g)
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range rounds {
							n := 1 + (g+i)%2
							p, err := acquirePermits(ctx, sem, n, i)
							if err != nil {
								errs <- fmt.Errorf("%s: %w", who, err)
								return
							}
							u.enter(who, int64(n), p.Token())
							time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
							u.exit(int64(n))
							if err := p.Release(ctx); err != nil {
								errs <- fmt.Errorf("%s: Release: %w", who, err)
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
			if !s.caps.Fencing {
				return
			}
			// Two holders at once: both granted, with tokens that grow.
			sem := s.client(t).NewSemaphore(name, limit)
			a := mustAcquire(t, ctx, sem, 1)
			b := mustAcquire(t, ctx, s.client(t).NewSemaphore(name, limit), 2)
			if b.Token() <= a.Token() {
				t.Errorf("the second grant's token %d is not above the first's %d", b.Token(), a.Token())
			}
			mustRelease(t, ctx, a)
			mustRelease(t, ctx, b)
		},
	},
	{
		name:   "semaphore/a_crashed_holders_permits_come_back_after_its_lease",
		proves: []string{CapSemaphore, CapExpiry},
		skip:   all(needWeighted, needCrash),
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			c, crash := s.crashable(t)
			mustAcquire(t, ctx, c.NewSemaphore(name, 3), 2)
			crash()
			if s.tryPermits(t, ctx, name, 3, 2) {
				t.Fatal("2 more permits were granted right after the crash: the crashed holder's lease cannot have run out yet")
			}
			start := time.Now()
			p, err := s.client(t).NewSemaphore(name, 3).AcquireTimeout(ctx, 3, s.pauseFor()+s.settle())
			if err != nil || p == nil {
				t.Fatalf("AcquireTimeout(3) after the crash = %v, %v: the crashed holder's permits did not come back", p, err)
			}
			t.Logf("the permits came back %v after the crash (TTL %v)", time.Since(start).Round(time.Millisecond), s.ttl)
			mustRelease(t, ctx, p)
		},
	},
	{
		name:   "semaphore/cancelled_and_timed_out_acquisitions_leave_the_whole_limit",
		proves: []string{CapSemaphore, CapCancellation},
		skip:   needWeighted,
		run: func(t *testing.T, s *suite) {
			const limit = 2
			ctx, name := s.start(t)
			// Long leases: a permit or a place left behind would outlast
			// the check.
			long := locker.WithTTL(30 * time.Second)
			holder := mustAcquire(t, ctx, s.client(t).NewSemaphore(name, limit, long), limit)
			var wg sync.WaitGroup
			for ci := range 2 {
				sem := s.client(t).NewSemaphore(name, limit, long)
				for g := range 6 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						n := 1 + g%2
						wctx, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(60))*time.Millisecond)
						defer cancel()
						var p *locker.Permit
						var err error
						switch (ci + g) % 3 {
						case 0:
							p, err = sem.Acquire(wctx, n)
						case 1:
							p, err = sem.AcquireTimeout(ctx, n, time.Duration(1+rand.IntN(60))*time.Millisecond)
						default:
							go func() {
								time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
								cancel()
							}()
							p, err = sem.Acquire(wctx, n)
						}
						if p != nil {
							t.Errorf("%d permits granted while another holder had all of them", n)
							_ = p.Release(ctx)
						}
						if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
							t.Errorf("Acquire(%d) = %v, want the ctx's error", n, err)
						}
					}()
				}
			}
			within(t, s.h.Timeout, "the cancelled acquisitions", wg.Wait)
			mustRelease(t, ctx, holder)
			if !s.tryPermits(t, ctx, name, limit, limit) {
				t.Error("after every acquisition was cancelled or timed out and the holder released, the whole limit cannot be taken at once: a permit or a place was left behind")
			}
		},
	},
	{
		name:   "semaphore/a_waiter_for_several_permits_is_not_overtaken_and_wakes_when_they_are_free",
		proves: []string{CapSemaphore},
		skip:   needWeighted,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			a := mustAcquire(t, ctx, s.client(t).NewSemaphore(name, 3), 2)
			b := mustAcquire(t, ctx, s.client(t).NewSemaphore(name, 3), 1)
			type result struct {
				p   *locker.Permit
				err error
			}
			got := make(chan result, 1)
			waiter := s.client(t).NewSemaphore(name, 3)
			go func() {
				p, err := waiter.Acquire(ctx, 2)
				got <- result{p, err}
			}()
			mustRelease(t, ctx, b)
			// One permit is free; the waiter for 2 came first. Once it
			// waits in the store, requests for 1 are refused.
			probe := s.client(t).NewSemaphore(name, 3)
			eventually(t, quick, "a request for 1 permit refused while a waiter for 2 waits", func() bool {
				p, err := probe.TryAcquire(ctx, 1)
				if err != nil {
					t.Fatalf("TryAcquire(1): %v", err)
				}
				if p == nil {
					return true
				}
				mustRelease(t, ctx, p)
				return false
			})
			select {
			case r := <-got:
				t.Fatalf("the waiter for 2 permits returned (%v, %v) while only 1 was free", r.p, r.err)
			default:
			}
			mustRelease(t, ctx, a)
			select {
			case r := <-got:
				if r.err != nil {
					t.Fatalf("the waiter's Acquire(2): %v", r.err)
				}
				mustRelease(t, ctx, r.p)
			case <-time.After(quick):
				t.Fatalf("the waiter for 2 permits was not granted within %v of 3 becoming free", quick)
			}
		},
	},
	{
		name:   "semaphore/the_limit_is_stored_with_the_name_and_a_conflict_is_an_error",
		proves: []string{CapSemaphore, CapInput},
		skip:   needWeighted,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			a := mustAcquire(t, ctx, s.client(t).NewSemaphore(name, 2), 1)
			other := s.client(t).NewSemaphore(name, 3)
			within(t, quick, "acquisitions with another limit", func() {
				if p, err := other.TryAcquire(ctx, 1); !errors.Is(err, locker.ErrLimitConflict) {
					t.Errorf("TryAcquire with limit 3 while a holder uses 2 = %v, %v; want ErrLimitConflict", p, err)
				}
				if p, err := other.Acquire(ctx, 1); !errors.Is(err, locker.ErrLimitConflict) {
					t.Errorf("Acquire with limit 3 while a holder uses 2 = %v, %v; want ErrLimitConflict at once", p, err)
				}
			})
			if !s.tryPermits(t, ctx, name, 2, 1) {
				t.Error("a second permit of 2 was refused")
			}
			mustRelease(t, ctx, a)
			// Nobody uses the name now: another limit may take it.
			if !s.tryPermits(t, ctx, name, 3, 3) {
				t.Error("a limit of 3 was refused once the name was free")
			}
		},
	},
	{
		name:   "semaphore/spi_a_renewal_never_brings_back_an_expired_permit",
		proves: []string{CapSemaphore, CapExpiry},
		skip: all(needWeighted, needExpiry, func(s *suite) string {
			if s.caps.SessionLease {
				return "the driver's holds live as long as its session: Renew only checks them"
			}
			return ""
		}),
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			d, other := s.driver(t), s.driver(t)
			defer d.Close()
			defer other.Close()
			r := backend.Request{Name: name, Owner: s.id + "-a", TTL: s.ttl, Kind: backend.Semaphore, Limit: 1, Weight: 1}
			la, err := d.Acquire(ctx, r)
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			// Wait for the permit to expire: another owner gets it.
			wctx, cancel := context.WithTimeout(ctx, 10*s.ttl+quick)
			rb := r
			rb.Owner, rb.TTL = s.id+"-b", 30*time.Second
			lb, err := acquireWaitingWeighted(wctx, other, rb)
			cancel()
			if err != nil {
				t.Fatalf("the next owner's wait for the expired permit: %v", err)
			}
			if err := la.Renew(ctx, 30*time.Second); !errors.Is(err, backend.ErrLost) {
				t.Errorf("Renew of an expired permit while another owner holds it = %v, want ErrLost", err)
			}
			if err := lb.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			// Nobody holds it now: a renewal must still not bring it back.
			if err := la.Renew(ctx, 30*time.Second); !errors.Is(err, backend.ErrLost) {
				t.Errorf("Renew of an expired permit of a free semaphore = %v, want ErrLost", err)
			}
			rc := r
			rc.Owner = s.id + "-c"
			lc, err := other.Acquire(ctx, rc)
			if err != nil {
				t.Fatalf("Acquire after the stale renewals = %v: a renewal brought back the expired permit", err)
			}
			_ = lc.Release(ctx)
		},
	},
	{
		name:   "semaphore/using_one_name_over_and_over_does_not_grow_the_store",
		proves: []string{CapSemaphore, CapScale},
		skip:   all(needWeighted, needFootprint),
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			c := s.client(t)
			sem := c.NewSemaphore(name, 2)
			cycle := func() {
				a := mustAcquire(t, ctx, sem, 2)
				wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
				if p, err := sem.Acquire(wctx, 1); p != nil || err == nil {
					t.Errorf("Acquire(1) while 2 of 2 are held = %v, %v", p, err)
				}
				cancel()
				if p, err := sem.TryAcquire(ctx, 1); p != nil || err != nil {
					t.Errorf("TryAcquire(1) while 2 of 2 are held = %v, %v", p, err)
				}
				mustRelease(t, ctx, a)
				b := mustAcquire(t, ctx, sem, 1)
				mustRelease(t, ctx, b)
			}
			cycle()
			before := s.footprint(t, ctx)
			for range 30 {
				cycle()
			}
			var after int
			eventually(t, quick, "the store's records back to their number after one use", func() bool {
				after = s.footprint(t, ctx)
				return after <= before
			})
			t.Logf("%d records after one use of the name, %d after 31", before, after)
		},
	},
}
