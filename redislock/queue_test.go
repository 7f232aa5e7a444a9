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
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/redislock"
)

// TestWaitersOfManyProcessesAreServedInArrivalOrder: 8 waiters spread
// over 4 Drivers (as 4 processes would be) get the lock in the order they
// arrived in Redis's queue, not in an order that favours one Driver. A
// Driver's second waiter arrives when its first has released (D8: only a
// Client's head asks the store).
func TestWaitersOfManyProcessesAreServedInArrivalOrder(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, 2*time.Minute)
	url := standaloneURL(t)
	name := "fifo/" + t.Name()
	holder := locked(t, ctx, openClient(t, url, locker.WithTTL(60*time.Second)), name)
	var clients []*locker.Client
	for range 4 {
		clients = append(clients, openClient(t, url, locker.WithTTL(60*time.Second)))
	}
	const n = 8
	order := make(chan int, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	q := clients[0].Driver().(backend.QueueInspector)
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
			if i >= 1 && i <= 4 {
				// A Client's second waiter joins Redis's queue once its
				// first has released the lock. Waiter i holds until the
				// previous Client's second has joined, so that it arrives
				// before this Client's second can: the queue then holds
				// the next two of the first round (or of the second) and
				// that waiter.
				deadline := time.Now().Add(10 * time.Second)
				for k, err := q.Waiters(ctx, name); err != nil || k != 3; k, err = q.Waiters(ctx, name) {
					if time.Now().After(deadline) {
						t.Errorf("waiter %d: the previous Client's next waiter did not join the queue (%d queued, %v)", i, k, err)
						break
					}
					time.Sleep(time.Millisecond)
				}
			}
			if err := m.Unlock(ctx); err != nil {
				t.Errorf("waiter %d: Unlock: %v", i, err)
			}
		})
		// A Client sends one waiter per name to Redis; its later ones
		// wait in the Client, and join Redis's queue in their turn.
		if i < 4 {
			awaitWaiters(t, ctx, clients[0], name, i+1)
		} else {
			awaitLocalWaiters(t, clients[i%4], name, 2)
		}
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
	ctx := drivertest.Context(t, 2*time.Minute)
	srv := standalone.Get(t)
	url := standaloneURL(t)
	name := "lapsed/" + t.Name()
	hc := openClient(t, url, locker.WithTTL(60*time.Second))
	holder := locked(t, ctx, hc, name)
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
	w := wc.NewMutex(name)
	got := queued(t, ctx, w, wc, 2)   // the ghost and the waiter
	awaitWaiters(t, ctx, wc, name, 1) // the ghost's place lapsed
	took := handOff(t, ctx, holder, got, "the waiter behind a lapsed place")
	t.Logf("the waiter behind the lapsed place got the lock %v after the release", took.Round(time.Microsecond))
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
	ctx := drivertest.Context(t, 2*time.Minute)
	url := standaloneURL(t)
	name := "cancelled/" + t.Name()
	hc := openClient(t, url, locker.WithTTL(60*time.Second))
	holder := locked(t, ctx, hc, name)
	wc := openClient(t, url, locker.WithTTL(60*time.Second))
	wctx, cancel := context.WithCancel(ctx)
	got := lockAsync(wctx, wc.NewMutex(name))
	awaitWaiters(t, ctx, wc, name, 1)
	cancel()
	if err := awaitLock(t, got, "a cancelled waiter"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Lock = %v, want context.Canceled", err)
	}
	if k, err := wc.Driver().(backend.QueueInspector).Waiters(ctx, name); err != nil || k != 0 {
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
	ctx := drivertest.Context(t, 2*time.Minute)
	srv := redisserver.Redis(t) // its own: the test kills every pub/sub connection
	url := "redis://" + srv.Addr
	name := "lostgrant/" + t.Name()
	hc := openClient(t, url, locker.WithTTL(60*time.Second))
	holder := locked(t, ctx, hc, name)
	wc := openClient(t, url, locker.WithTTL(3*time.Second))
	w := wc.NewMutex(name)
	got := queued(t, ctx, w, wc, 1)
	// The waiter's Driver's pub/sub connection: the only one here.
	if _, err := srv.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
		t.Fatal(err)
	}
	took := handOff(t, ctx, holder, got, "the waiter whose grant's message was lost")
	t.Logf("the waiter got the lock %v after a release whose message may have been lost", took.Round(time.Millisecond))
	if err := w.Unlock(ctx); err != nil {
		t.Error(err)
	}
}

// awaitWaiters waits until exactly n owners are in name's queue, as c's
// Driver counts them.
func awaitWaiters(t *testing.T, ctx context.Context, c *locker.Client, name string, n int) {
	t.Helper()
	q := c.Driver().(backend.QueueInspector)
	drivertest.Eventually(t, 30*time.Second, fmt.Sprintf("%d waiter(s) on %s", n, name), func() bool {
		k, err := q.Waiters(ctx, name)
		return err == nil && k == n
	})
}

// locked returns a handle of c on name, locked, or fails the test.
func locked(t *testing.T, ctx context.Context, c *locker.Client, name string) *locker.Mutex {
	t.Helper()
	m := c.NewMutex(name)
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock(%s): %v", name, err)
	}
	return m
}

// queued starts m's Lock (lockAsync) and returns its outcome's channel
// once Redis, asked through c, has n owners in the queue of m's name.
func queued(t *testing.T, ctx context.Context, m *locker.Mutex, c *locker.Client, n int) <-chan error {
	t.Helper()
	got := lockAsync(ctx, m)
	awaitWaiters(t, ctx, c, m.Name(), n)
	return got
}

// lockAsync starts m.Lock(ctx) and returns its outcome's channel.
func lockAsync(ctx context.Context, m *locker.Mutex) <-chan error {
	got := make(chan error, 1)
	go func() { got <- m.Lock(ctx) }()
	return got
}

// handOff unlocks holder and waits for the Lock whose outcome got gives,
// which must succeed: it returns how long that took after the release.
func handOff(t *testing.T, ctx context.Context, holder *locker.Mutex, got <-chan error, what string) time.Duration {
	t.Helper()
	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := awaitLock(t, got, what); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return time.Since(released)
}

// awaitLock returns the outcome of a Lock started by lockAsync, failing
// the test if it takes over 10s.
func awaitLock(t *testing.T, got <-chan error, what string) error {
	t.Helper()
	return drivertest.Receive(t, got, 10*time.Second, what+": Lock")
}
