package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/redislock"
)

// TestWaitersOfManyProcessesAreServedInArrivalOrder: 8 waiters spread
// over 4 Drivers (as 4 processes would be) get the lock in the order they
// began to wait, not in an order that favours one Driver.
func TestWaitersOfManyProcessesAreServedInArrivalOrder(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 2*time.Minute)
	url := standaloneURL(t)
	name := "fifo/" + t.Name()
	holder := openClient(t, url, locker.WithTTL(60*time.Second)).NewMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	var clients []*locker.Client
	for range 4 {
		clients = append(clients, openClient(t, url, locker.WithTTL(60*time.Second)))
	}
	q := clients[0].Driver().(backend.QueueInspector)
	const n = 8
	order := make(chan int, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range n {
		// Driver i%4, arriving only once the previous waiter is queued.
		m := clients[i%4].NewMutex(name)
		wg.Go(func() {
			if err := m.Lock(ctx); err != nil {
				t.Errorf("waiter %d: %v", i, err)
				order <- -1
				return
			}
			order <- i
			if err := m.Unlock(ctx); err != nil {
				t.Errorf("waiter %d: Unlock: %v", i, err)
			}
		})
		eventually(t, 30*time.Second, fmt.Sprintf("waiter %d queued", i), func() bool {
			k, err := q.Waiters(ctx, name)
			return err == nil && k == i+1
		})
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var got []int
	for range n {
		select {
		case i := <-order:
			got = append(got, i)
		case <-ctx.Done():
			t.Fatalf("only %v got the lock", got)
		}
	}
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(got, want) {
		t.Errorf("grant order %v, want the arrival order %v", got, want)
	}
}

// TestALapsedPlaceIsSkipped: a waiter that stopped renewing its place (a
// crashed process, here an entry written by hand) is skipped once its
// place lapses: the release hands the lock to the live waiter behind it.
func TestALapsedPlaceIsSkipped(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 2*time.Minute)
	srv := standalone.Get(t)
	url := standaloneURL(t)
	name := "lapsed/" + t.Name()
	hc := openClient(t, url, locker.WithTTL(60*time.Second))
	holder := hc.NewMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	key := hc.Driver().(*redislock.Driver).Key(name)
	// A ghost at the head of the queue whose place lapses in 300ms.
	now, err := srv.Do(ctx, "TIME")
	if err != nil {
		t.Fatal(err)
	}
	tm := now.([]any)
	sec, _ := strconv.ParseInt(tm[0].(string), 10, 64)
	usec, _ := strconv.ParseInt(tm[1].(string), 10, 64)
	deadline := sec*1000 + usec/1000 + 300
	if _, err := srv.Do(ctx, "RPUSH", key+":queue", "ghost"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do(ctx, "HSET", key+":waiters", "ghost", fmt.Sprintf("%d 60000 ", deadline)); err != nil {
		t.Fatal(err)
	}
	wc := openClient(t, url, locker.WithTTL(60*time.Second))
	q := wc.Driver().(backend.QueueInspector)
	w := wc.NewMutex(name)
	got := make(chan error, 1)
	go func() { got <- w.Lock(ctx) }()
	eventually(t, 30*time.Second, "the ghost and the waiter queued", func() bool {
		k, err := q.Waiters(ctx, name)
		return err == nil && k == 2
	})
	eventually(t, 30*time.Second, "the ghost's place lapsed", func() bool {
		k, err := q.Waiters(ctx, name)
		return err == nil && k == 1
	})
	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
		t.Logf("the waiter behind the lapsed place got the lock %v after the release", time.Since(released).Round(time.Microsecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter behind a lapsed place did not get the lock")
	}
	holds, err := hc.Holds(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(holds) != 1 || holds[0].Owner == "ghost" {
		t.Errorf("holds %+v, want the live waiter's", holds)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Error(err)
	}
}

// TestACancelledWaiterLeavesTheQueue: a Lock whose ctx ends takes its
// place out of the queue before it returns, so the next release does not
// hand the lock to an owner that is gone: the lock is free after it.
func TestACancelledWaiterLeavesTheQueue(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 2*time.Minute)
	url := standaloneURL(t)
	name := "cancelled/" + t.Name()
	hc := openClient(t, url, locker.WithTTL(60*time.Second))
	holder := hc.NewMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	wc := openClient(t, url, locker.WithTTL(60*time.Second))
	q := wc.Driver().(backend.QueueInspector)
	wctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() { got <- wc.NewMutex(name).Lock(wctx) }()
	eventually(t, 30*time.Second, "the waiter queued", func() bool {
		k, err := q.Waiters(ctx, name)
		return err == nil && k == 1
	})
	cancel()
	select {
	case err := <-got:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Lock = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled Lock did not return")
	}
	if k, err := q.Waiters(ctx, name); err != nil || k != 0 {
		t.Errorf("Waiters after the cancelled Lock returned = %d, %v; want 0", k, err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	probe := openClient(t, url).NewMutex(name)
	if ok, err := probe.TryLock(ctx); !ok || err != nil {
		t.Fatalf("TryLock after the release = %v, %v: the lock went to the cancelled waiter", ok, err)
	}
	if err := probe.Unlock(ctx); err != nil {
		t.Error(err)
	}
}

// TestAGrantLostWithThePubSubConnectionIsFound: a grant published while
// the waiter's Driver has no pub/sub connection is lost; the waiter still
// gets the lock, when go-redis subscribes again or at its next renewal of
// its place (a third of the lease, here 1s).
func TestAGrantLostWithThePubSubConnectionIsFound(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 2*time.Minute)
	srv := testserver.Redis(t) // its own: the test kills every pub/sub connection
	url := "redis://" + srv.Addr
	name := "lostgrant/" + t.Name()
	hc := openClient(t, url, locker.WithTTL(60*time.Second))
	holder := hc.NewMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	wc := openClient(t, url, locker.WithTTL(3*time.Second))
	q := wc.Driver().(backend.QueueInspector)
	got := make(chan error, 1)
	w := wc.NewMutex(name)
	go func() { got <- w.Lock(ctx) }()
	eventually(t, 30*time.Second, "the waiter queued", func() bool {
		k, err := q.Waiters(ctx, name)
		return err == nil && k == 1
	})
	// The waiter's Driver's pub/sub connection: the only one here.
	if _, err := srv.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
		t.Logf("the waiter got the lock %v after a release whose message may have been lost", time.Since(released).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock after its grant's message was lost")
	}
	if err := w.Unlock(ctx); err != nil {
		t.Error(err)
	}
}
