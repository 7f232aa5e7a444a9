package drivertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/testserver"
)

// ServedInArrivalOrder checks the order of a store whose waiters queue in
// the store without a QueueInspector that the conformance suite could use
// (mysqllock on MySQL, whose gates are the server's user locks): waiters
// of separate Clients (as of separate processes) get name in the order
// they began to wait, and the owner that releases it and locks again at
// once comes after them. Each Client is opened from url; queued returns
// how many waiters the store has queued.
func ServedInArrivalOrder(t *testing.T, ctx context.Context, url, name string, waiters int, queued func() int64) {
	t.Helper()
	client := func() *locker.Client { return Client(t, ctx, url) }
	holder := client().NewMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	order := make(chan int, waiters+1)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range waiters {
		m := client().NewMutex(name)
		wg.Go(func() {
			if err := m.Lock(ctx); err != nil {
				t.Error(err)
				order <- -1
				return
			}
			order <- i
			time.Sleep(2 * time.Millisecond)
			if err := m.Unlock(ctx); err != nil {
				t.Error(err)
			}
		})
		// The next waiter comes once this one is queued.
		Eventually(t, 30*time.Second, fmt.Sprintf("waiter %d is queued", i), func() bool { return queued() == int64(i+1) })
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	order <- waiters
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for want := range waiters + 1 {
		if got := <-order; got != want {
			t.Fatalf("grant %d went to %d, want %d (%d is the releasing owner)", want, got, want, waiters)
		}
	}
}

// FirstAcquireRaces has drivers take a name that nobody took before (a row
// or document the store must create) all at once, in five rounds: exactly
// one wins each round, and the others are told the lock is held — no
// duplicate key error reaches them. check, when not nil, checks the
// winner's lease.
func FirstAcquireRaces[D backend.Driver](t *testing.T, ctx context.Context, drivers []D, check func(backend.Lease) error) {
	t.Helper()
	for round := range 5 {
		name := fmt.Sprintf("first/%d", round)
		wins, _ := testserver.Race(len(drivers), func(i int) error {
			l, err := drivers[i].Acquire(ctx, backend.Request{Name: name, Owner: fmt.Sprintf("o%d", i), TTL: time.Minute})
			if err == nil && check != nil {
				err = check(l)
			}
			return err
		}, func(err error) bool { return errors.Is(err, backend.ErrHeld) }, func(i int, err error) {
			t.Errorf("round %d, owner %d: %v", round, i, err)
		})
		if wins != 1 {
			t.Errorf("round %d: %d winners, want 1", round, wins)
		}
	}
}
