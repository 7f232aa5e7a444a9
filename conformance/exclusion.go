package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
)

// resource is what a lock guards. It detects two owners inside at once and,
// for fencing drivers, a token that does not grow.
type resource struct {
	fencing bool

	mu      sync.Mutex
	inside  int
	last    uint64
	entries int
	errs    []string
}

func (r *resource) enter(who string, token uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inside++
	r.entries++
	if r.inside > 1 {
		r.errs = append(r.errs, fmt.Sprintf("%s entered while %d other owner(s) were inside", who, r.inside-1))
	}
	if r.fencing {
		if token <= r.last {
			r.errs = append(r.errs, fmt.Sprintf("%s entered with token %d, not above the last token %d", who, token, r.last))
		}
		r.last = token
	}
}

func (r *resource) exit() {
	r.mu.Lock()
	r.inside--
	r.mu.Unlock()
}

func (r *resource) check(t *testing.T, wantEntries int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range r.errs {
		if i == 10 {
			t.Errorf("... and %d more", len(r.errs)-10)
			break
		}
		t.Error(e)
	}
	if r.entries != wantEntries {
		t.Errorf("%d entries, want %d", r.entries, wantEntries)
	}
}

var exclusionChecks = []check{
	{
		name:   "exclusion/one_owner_at_a_time_across_clients_and_goroutines",
		proves: []string{CapExclusion, CapFencing},
		run: func(t *testing.T, s *suite) {
			const clients, perClient, rounds = 3, 4, 12
			ctx := s.ctx(t)
			name := s.name(t, "shared")
			res := &resource{fencing: s.caps.Fencing}
			var wg sync.WaitGroup
			errs := make(chan error, clients*perClient)
			for ci := range clients {
				c := s.client(t)
				for g := range perClient {
					who := fmt.Sprintf("client %d goroutine %d", ci, g)
					m := c.NewMutex(name)
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range rounds {
							if err := acquireSomehow(ctx, m, i); err != nil {
								errs <- fmt.Errorf("%s: %w", who, err)
								return
							}
							res.enter(who, m.Token())
							time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
							res.exit()
							if err := m.Unlock(ctx); err != nil {
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
			res.check(t, clients*perClient*rounds)
		},
	},
}

// acquireSomehow takes l with Lock, TryLock in a loop, or LockTimeout in a
// loop, by round, so that every way to acquire is part of the exclusion
// checks.
func acquireSomehow(ctx context.Context, l locker.Locker, round int) error {
	switch round % 3 {
	case 0:
		return l.Lock(ctx)
	case 1:
		for {
			ok, err := l.LockTimeout(ctx, 50*time.Millisecond)
			if err != nil || ok {
				return err
			}
		}
	default:
		for {
			ok, err := l.TryLock(ctx)
			if err != nil || ok {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}
}
