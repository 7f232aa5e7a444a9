package conformance

import (
	"errors"
	"fmt"
	"testing"

	"github.com/golocker/locker"
)

var closeChecks = []check{
	{
		name:   "close/releases_every_hold_ends_waits_and_leaks_no_goroutine",
		proves: []string{CapExclusion},
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			// Every client of the check is closed before the goroutines
			// are counted: a driver may set up the watches of a hold
			// after Lock returned, and a client's Close must end them.
			s.openProbe(t) // counted in before, closed before the count after
			before := goroutines()
			other := s.client(t)
			blocked := s.name(t, "blocked")
			blockerClient := s.client(t)
			blocker := blockerClient.NewMutex(blocked)
			mustLock(t, ctx, blocker)

			c, err := locker.New(s.driver(t), locker.WithTTL(s.ttl))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			var names []string
			var handles []*locker.Mutex
			octx := locker.WithOwner(ctx)
			for i := range 10 {
				n := s.name(t, fmt.Sprint(i))
				m := c.NewMutex(n)
				mustLock(t, octx, m)
				names, handles = append(names, n), append(handles, m)
			}
			mustLock(t, octx, handles[0]) // re-entered
			waiter := make(chan error, 1)
			go func() { waiter <- c.NewMutex(blocked).Lock(ctx) }()
			s.awaitWaiters(t, ctx, blocked, 1)

			within(t, quick+s.ttl, "Close", func() {
				if err := c.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			within(t, quick, "a wait ended by Close", func() {
				if err := <-waiter; !errors.Is(err, locker.ErrClosed) {
					t.Errorf("Lock waiting when Close was called = %v, want ErrClosed", err)
				}
			})
			for _, n := range names {
				if !s.free(t, ctx, other, n) {
					t.Errorf("%s is still held after Close", n)
				}
			}
			if err := handles[1].Lock(ctx); !errors.Is(err, locker.ErrClosed) {
				t.Errorf("Lock after Close = %v, want ErrClosed", err)
			}
			if err := handles[1].Unlock(ctx); !errors.Is(err, locker.ErrClosed) {
				t.Errorf("Unlock after Close = %v, want ErrClosed", err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("second Close = %v, want nil", err)
			}
			mustUnlock(t, ctx, blocker)
			for _, cl := range []*locker.Client{other, blockerClient} {
				if err := cl.Close(); err != nil {
					t.Errorf("Close of another client: %v", err)
				}
			}
			s.closeProbe(t)
			settleGoroutines(t, before, "the goroutines of the closed clients")
		},
	},
}
