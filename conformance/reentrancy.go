package conformance

import (
	"errors"
	"sync"
	"testing"

	"github.com/golocker/locker"
)

var reentrancyChecks = []check{
	{
		name:   "reentrancy/counts_keeps_the_token_and_frees_after_the_last_unlock",
		proves: []string{CapReentrancy},
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			name := s.name(t, "l")
			other := s.client(t)
			m := s.client(t).NewMutex(name)
			mustLock(t, ctx, m)
			tok := m.Token()
			mustLock(t, ctx, m)
			if ok, err := m.TryLock(ctx); !ok || err != nil {
				t.Fatalf("TryLock on a held handle = %v, %v; want true", ok, err)
			}
			if ok, err := m.LockTimeout(ctx, 0); !ok || err != nil {
				t.Fatalf("LockTimeout on a held handle = %v, %v; want true", ok, err)
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
		name:   "reentrancy/one_handle_shared_by_goroutines_is_one_owner",
		proves: []string{CapReentrancy},
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			name := s.name(t, "l")
			m := s.client(t).NewMutex(name)
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 20 {
						if err := m.Lock(ctx); err != nil {
							t.Errorf("Lock: %v", err)
							return
						}
						if err := m.Unlock(ctx); err != nil {
							t.Errorf("Unlock: %v", err)
							return
						}
					}
				}()
			}
			within(t, s.h.Timeout, "goroutines sharing a handle", wg.Wait)
			if n := m.HoldCount(); n != 0 {
				t.Errorf("HoldCount = %d after balanced Lock/Unlock, want 0", n)
			}
			if !s.free(t, ctx, s.client(t), name) {
				t.Error("the lock is held after balanced Lock/Unlock from several goroutines")
			}
		},
	},
}
