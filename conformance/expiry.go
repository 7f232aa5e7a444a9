package conformance

import (
	"testing"
	"time"

	"github.com/golocker/locker"
)

var expiryChecks = []check{
	{
		name:   "expiry/a_crashed_holders_lock_is_free_after_its_lease",
		proves: []string{CapExpiry},
		skip:   needCrash,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			c, crash := s.crashable(t)
			mustLock(t, ctx, c.NewMutex(name))
			crash()
			b := s.client(t).NewMutex(name)
			if ok, err := b.TryLock(ctx); ok || err != nil {
				t.Fatalf("TryLock right after the crash = %v, %v; want false: the lease cannot have run out yet", ok, err)
			}
			start := time.Now()
			ok, err := b.LockTimeout(ctx, s.h.Timeout/2)
			if err != nil || !ok {
				t.Fatalf("LockTimeout after the crash = %v, %v; the crashed holder's lock was not freed within %v", ok, err, s.h.Timeout/2)
			}
			t.Logf("freed %v after the crash (TTL %v)", time.Since(start).Round(time.Millisecond), s.ttl)
			mustUnlock(t, ctx, b)
		},
	},
	{
		name:   "renewal/a_living_holder_keeps_its_lock_well_past_the_ttl",
		proves: []string{CapRenewal, CapSessionLease},
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			m := locked(t, ctx, s.client(t), name)
			since := time.Now()
			other := s.client(t)
			end := since.Add(3*s.ttl + s.ttl/2)
			for probes := 0; time.Now().Before(end); probes++ {
				if s.free(t, ctx, other, name) {
					t.Fatalf("another client took the lock %v into a hold with TTL %v", time.Since(since), s.ttl)
				}
				select {
				case <-m.Lost():
					t.Fatalf("the hold was reported lost after %d probes", probes)
				case <-time.After(s.ttl / 5):
				}
			}
			mustUnlock(t, ctx, m)
			if !s.free(t, ctx, other, name) {
				t.Error("the lock is held after Unlock")
			}
		},
	},
	{
		name:   "expiry/a_fixed_lease_ends_and_is_reported_before_another_owner_gets_it",
		proves: []string{CapExpiry, CapLostSignal},
		skip: func(s *suite) string {
			if !s.caps.Expiry && !s.caps.SessionLease {
				return "the driver declares neither Expiry nor SessionLease"
			}
			return ""
		},
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			c := s.client(t)
			start := time.Now()
			a := locked(t, ctx, c, name, locker.WithFixedLease())
			s.takeOver(t, ctx, a, 10*s.ttl+quick, "the first owner's fixed lease runs out")
			if got := time.Since(start); got < s.ttl/2 {
				t.Errorf("a fixed lease of %v ended after only %v", s.ttl, got)
			}
		},
	},
	{
		name:   "expiry/failing_renewals_are_reported_before_another_owner_gets_the_lock",
		proves: []string{CapExpiry, CapRenewal},
		skip:   needCut,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			s.cutOff(t, ctx, name, 10*s.ttl+quick)
		},
	},
}
