package conformance

import (
	"context"
	"testing"

	"github.com/golocker/locker"
)

var fencingChecks = []check{
	{
		name:   "fencing/tokens_strictly_increase_across_holders",
		proves: []string{CapFencing},
		skip:   needFencing,
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			name, other := s.name(t, "l"), s.name(t, "other")
			clients := []*locker.Client{s.client(t), s.client(t)}
			var last uint64
			for i := range 12 {
				c := clients[i%2]
				m := c.NewMutex(name)
				mustLock(t, ctx, m)
				tok := m.Token()
				if tok <= last {
					t.Errorf("holder %d got token %d, not above the previous %d", i, tok, last)
				}
				last = tok
				mustUnlock(t, ctx, m)
				if m.Token() != 0 {
					t.Errorf("Token = %d after Unlock, want 0", m.Token())
				}
				// Activity on another name must not matter.
				o := c.NewMutex(other)
				mustLock(t, ctx, o)
				mustUnlock(t, ctx, o)
			}
		},
	},
	{
		name:   "fencing/a_lost_holders_token_is_below_the_next_owners",
		proves: []string{CapFencing},
		skip: func(s *suite) string {
			if why := needFencing(s); why != "" {
				return why
			}
			return needStale(s)
		},
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			name := s.name(t, "l")
			a := s.client(t).NewMutex(name, locker.WithFixedLease())
			mustLock(t, ctx, a)
			stale := a.Token()
			s.makeStale(t, ctx, name, a.Lost())
			b := s.client(t).NewMutex(name)
			lctx, cancel := context.WithTimeout(ctx, 10*s.ttl+quick)
			defer cancel()
			mustLock(t, lctx, b)
			defer mustUnlock(t, ctx, b)
			if b.Token() <= stale {
				t.Errorf("the next owner's token %d is not above the lost holder's %d: a resource could not refuse the stale owner's writes", b.Token(), stale)
			}
			_ = a.Unlock(ctx)
		},
	},
	{
		name:   "fencing/no_token_without_a_hold",
		proves: []string{CapFencing},
		run: func(t *testing.T, s *suite) {
			m := s.client(t).NewMutex(s.name(t, "l"))
			if m.Token() != 0 {
				t.Errorf("Token = %d before any Lock, want 0", m.Token())
			}
		},
	},
}
