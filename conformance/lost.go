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
	// Inspection: a forced release is how an operator makes a hold lost.
	{
		name:   "inspect/holds_lists_each_hold_by_prefix_with_its_token",
		proves: []string{CapInspect},
		skip:   needInspector,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			a := locked(t, ctx, s.client(t), name+"/a")
			b := locked(t, ctx, s.client(t), name+"/b")
			probe := s.client(t)
			hs := holdsByName(t, ctx, probe, name+"/")
			if len(hs) != 2 {
				t.Fatalf("Holds(%q) = %+v; want the holds of %s/a and %s/b", name+"/", hs, name, name)
			}
			now := time.Now()
			for _, m := range []*locker.Mutex{a, b} {
				h, ok := hs[m.Name()]
				switch {
				case !ok:
					t.Errorf("Holds(%q) = %+v; no hold of %s", name+"/", hs, m.Name())
					continue
				case h.Owner == "":
					t.Errorf("the hold of %s has no owner", h.Name)
				}
				if s.caps.Fencing && h.Token != m.Token() {
					t.Errorf("the hold of %s has token %d, its holder %d", h.Name, h.Token, m.Token())
				}
				// A lease's end is the store's clock's: allow the clocks of
				// a remote store a few seconds of disagreement.
				if !s.caps.SessionLease && (h.Expires.Before(now.Add(-quick)) || h.Expires.After(now.Add(s.ttl+quick))) {
					t.Errorf("the hold of %s expires at %v, want within its lease %v of now (%v)", h.Name, h.Expires, s.ttl, now)
				}
			}
			if hs := holdsByName(t, ctx, probe, name+"/c"); len(hs) != 0 {
				t.Errorf("Holds(%q) = %+v, want none", name+"/c", hs)
			}
			mustUnlock(t, ctx, a)
			if hs := holdsByName(t, ctx, probe, name+"/"); len(hs) != 1 || hs[name+"/b"].Name == "" {
				t.Errorf("Holds(%q) after %s/a's Unlock = %+v; want %s/b's hold alone", name+"/", name, hs, name)
			}
			mustUnlock(t, ctx, b)
			if hs := holdsByName(t, ctx, probe, name+"/"); len(hs) != 0 {
				t.Errorf("Holds(%q) after every Unlock = %+v, want none", name+"/", hs)
			}
		},
	},
	{
		name:   "inspect/force_release_frees_the_lock_and_its_holder_learns_it",
		proves: []string{CapInspect, CapExclusion},
		skip:   needInspector,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			m := locked(t, ctx, s.client(t), name)
			admin := s.client(t)
			if err := admin.ForceRelease(ctx, name); err != nil {
				t.Fatalf("ForceRelease of a held lock: %v", err)
			}
			next := s.client(t).NewMutex(name)
			var ok bool
			var err error
			within(t, quick, "TryLock after ForceRelease", func() { ok, err = next.TryLock(ctx) })
			if err != nil || !ok {
				t.Fatalf("TryLock after ForceRelease = %v, %v; want true, nil", ok, err)
			}
			if s.caps.Fencing && next.Token() <= m.Token() {
				t.Errorf("the next holder's token %d is not above the released holder's %d", next.Token(), m.Token())
			}
			if err := m.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
				t.Errorf("Unlock of a hold released by force = %v, want ErrLost", err)
			}
			if hs, err := admin.Holds(ctx, name); err != nil || len(hs) != 1 || (s.caps.Fencing && hs[0].Token != next.Token()) {
				t.Errorf("Holds after the next holder took the lock = %+v, %v; want its hold, token %d", hs, err, next.Token())
			}
			mustUnlock(t, ctx, next)
			if err := admin.ForceRelease(ctx, name); !errors.Is(err, locker.ErrNotHeld) {
				t.Errorf("ForceRelease of a free lock = %v, want ErrNotHeld", err)
			}
		},
	},
}
