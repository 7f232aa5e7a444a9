package conformance

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

// wakeBound is how soon a released lock must reach a waiter on a driver that
// declares Notify. It is far above a notification's latency and far below
// the long lease the check uses, so only a wake-up by the store passes it
// reliably.
const wakeBound = time.Second

var notifyChecks = []check{
	{
		name:   "notify/a_release_wakes_a_waiter_promptly",
		proves: []string{CapNotify},
		skip:   needNotify,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			ac, bc := s.client(t, locker.WithTTL(60*time.Second)), s.client(t, locker.WithTTL(60*time.Second))
			var worst time.Duration
			for round := range 5 {
				a := locked(t, ctx, ac, name)
				b := bc.NewMutex(name)
				got := make(chan time.Time, 1)
				go func() {
					if err := b.Lock(ctx); err != nil {
						t.Errorf("waiter: %v", err)
					}
					got <- time.Now()
				}()
				s.awaitWaiters(t, ctx, name, 1)
				released := time.Now()
				mustUnlock(t, ctx, a)
				var at time.Time
				within(t, 10*time.Second, "the waiter", func() { at = <-got })
				lat := at.Sub(released)
				worst = max(worst, lat)
				if lat > wakeBound {
					t.Errorf("round %d: the waiter got the lock %v after the release, want within %v", round, lat, wakeBound)
				}
				mustUnlock(t, ctx, b)
			}
			t.Logf("slowest wake-up: %v", worst)
		},
	},
	{
		name:   "fifo/waiters_are_granted_in_arrival_order_and_one_at_a_time",
		proves: []string{CapFIFO, CapNotify},
		skip:   needFIFO,
		run: func(t *testing.T, s *suite) {
			const n = 5
			ctx, name := s.start(t)
			holder := locked(t, ctx, s.client(t, locker.WithTTL(60*time.Second)), name)
			order := make(chan int, n)
			proceed := make([]chan struct{}, n)
			waiters := make([]*locker.Mutex, n)
			var wg sync.WaitGroup
			defer wg.Wait()
			for i := range n {
				// A Client each: a Client's own waiters for a name queue
				// in the Client, and only the first of them in the store.
				waiters[i] = s.client(t, locker.WithTTL(60*time.Second)).NewMutex(name)
				proceed[i] = make(chan struct{})
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := waiters[i].Lock(ctx); err != nil {
						t.Errorf("waiter %d: %v", i, err)
						return
					}
					order <- i
					<-proceed[i]
					if err := waiters[i].Unlock(ctx); err != nil {
						t.Errorf("waiter %d: Unlock: %v", i, err)
					}
				}()
				// The next waiter arrives only once this one is queued.
				s.awaitWaiters(t, ctx, name, i+1)
			}
			mustUnlock(t, ctx, holder)
			var got []int
			for i := range n {
				var w int
				within(t, 10*time.Second, fmt.Sprintf("grant %d", i), func() { w = <-order })
				got = append(got, w)
				// Only the next waiter was woken: the rest still wait.
				if k, _ := s.waiters(t, ctx, name); k != n-1-i {
					t.Errorf("after grant %d: Waiters = %d; want %d", i, k, n-1-i)
				}
				close(proceed[w])
			}
			if want := []int{0, 1, 2, 3, 4}; !slices.Equal(got, want) {
				t.Errorf("grant order %v, want arrival order %v", got, want)
			}
		},
	},
}

// waiters counts the owners waiting for name in the store, through a
// driver of its own, when the driver can count them.
func (s *suite) waiters(t *testing.T, ctx context.Context, name string) (int, bool) {
	t.Helper()
	if !s.ifs.QueueInspector {
		return 0, false
	}
	d := s.probeDriver(t)
	n, err := d.(backend.QueueInspector).Waiters(ctx, name)
	if err != nil {
		t.Fatalf("Waiters: %v", err)
	}
	return n, true
}

// holds lists the holds of exactly name in the store, when the driver can
// inspect.
func (s *suite) holds(t *testing.T, ctx context.Context, name string) ([]backend.Hold, bool) {
	t.Helper()
	if !s.ifs.Inspector {
		return nil, false
	}
	d := s.probeDriver(t)
	hs, err := d.(backend.Inspector).Holds(ctx, name)
	if err != nil {
		t.Fatalf("Holds: %v", err)
	}
	var exact []backend.Hold
	for _, h := range hs {
		if h.Name == name {
			exact = append(exact, h)
		}
	}
	return exact, true
}

// holdsByName lists the holds of prefix through c, by name, or fails the
// check.
func holdsByName(t *testing.T, ctx context.Context, c *locker.Client, prefix string) map[string]backend.Hold {
	t.Helper()
	hs, err := c.Holds(ctx, prefix)
	if err != nil {
		t.Fatalf("Holds(%q): %v", prefix, err)
	}
	byName := make(map[string]backend.Hold)
	for _, h := range hs {
		byName[h.Name] = h
	}
	return byName
}

// awaitWaiters waits until n owners wait for name in the store, when the
// driver can count them; otherwise it gives the waiter a moment to start
// waiting.
func (s *suite) awaitWaiters(t *testing.T, ctx context.Context, name string, n int) {
	t.Helper()
	if !s.ifs.QueueInspector {
		// Without a count, a waiter that has not started waiting yet finds
		// the lock free at its first try: the check then proves less but
		// stays sound.
		time.Sleep(200 * time.Millisecond)
		return
	}
	eventually(t, 10*time.Second, fmt.Sprintf("%d waiter(s) queued", n), func() bool {
		k, _ := s.waiters(t, ctx, name)
		return k >= n
	})
}
