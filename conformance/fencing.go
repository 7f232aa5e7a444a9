package conformance

import (
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
				m := locked(t, ctx, c, name)
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
		skip:   all(needFencing, needStale),
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			a, stale := s.staleHolder(t, ctx, name)
			b := s.takeOver(t, ctx, a, 10*s.ttl+quick, "the first owner's hold is stale")
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
