package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golocker/locker"
)

var lostChecks = []check{
	{
		name:   "lost/a_hold_dropped_by_the_store_closes_Lost",
		proves: []string{CapLostSignal},
		skip:   needDrop,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			// With LostSignal the store's report must arrive long before
			// the first renewal could notice; without it, the first
			// renewal after the drop must.
			ttl, bound := s.ttl, s.ttl+quick
			if s.caps.LostSignal {
				ttl, bound = 60*time.Second, quick
			}
			m := s.client(t).NewMutex(name, locker.WithTTL(ttl))
			octx := locker.WithOwner(ctx)
			mustLock(t, octx, m)
			mustLock(t, octx, m) // re-entered: every level learns of the loss
			s.drop(t, ctx, name)
			select {
			case <-m.Lost():
			case <-time.After(bound):
				t.Fatalf("Lost did not close within %v of the drop", bound)
			}
			if err := m.Lock(octx); !errors.Is(err, locker.ErrLost) {
				t.Errorf("Lock by the owner whose hold was lost = %v, want ErrLost", err)
			}
			for range 2 {
				if err := m.Unlock(octx); !errors.Is(err, locker.ErrLost) {
					t.Errorf("Unlock after the loss = %v, want ErrLost", err)
				}
			}
			if err := m.Unlock(octx); !errors.Is(err, locker.ErrNotHeld) {
				t.Errorf("Unlock past the levels of the lost hold = %v, want ErrNotHeld", err)
			}
			// The handle is usable again.
			mustLock(t, ctx, m)
			mustUnlock(t, ctx, m)
		},
	},
	{
		name:   "lost/do_cancels_its_ctx_when_the_hold_is_lost",
		proves: []string{CapLostSignal},
		skip:   needDrop,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			m := s.client(t).NewMutex(name)
			var cause error
			err := locker.Do(ctx, m, func(ctx context.Context) error {
				s.drop(t, ctx, name)
				select {
				case <-ctx.Done():
					cause = context.Cause(ctx)
					return ctx.Err()
				case <-time.After(s.ttl + quick):
					return errors.New("ctx not cancelled after the hold was dropped")
				}
			})
			if !errors.Is(err, locker.ErrLost) {
				t.Errorf("Do = %v, want an error wrapping ErrLost", err)
			}
			if !errors.Is(cause, locker.ErrLost) {
				t.Errorf("context.Cause = %v, want ErrLost", cause)
			}
		},
	},
}
