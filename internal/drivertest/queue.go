package drivertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
)

// QueueDriver is a driver whose waiters wait in the store's queue.
type QueueDriver interface {
	backend.Driver
	backend.Waiter
	backend.QueueInspector
}

// Queue is what the queue checks need of a driver whose waiters each wait
// in the store for the holder just before them (etcd's keys, ZooKeeper's
// sequential nodes): its waits (backend.Waiter), its queue
// (backend.QueueInspector) and two counters of its export_test.go hooks.
type Queue[D QueueDriver] struct {
	// Open returns a new driver on the store under test, independent of
	// the others as one in another process would be, closed when the test
	// ends.
	Open func(t *testing.T) D
	// Waiting returns how many of d's waiters wait for the one before
	// them to go.
	Waiting func(d D) int64
	// Wakeups returns how many times d's waiters were woken by the
	// deletion of the one before them.
	Wakeups func(d D) int64
}

// Process is a store's server process that a test can stop and continue
// (testserver.Process: SIGSTOP and SIGCONT).
type Process interface {
	Pause() error
	Resume() error
}

// GiveUpWhileTheServerIsDown cancels a waiter while the store does not
// answer (srv is stopped): AcquireWait must return within 10 seconds
// rather than hang on the deletion of its place in the queue, and the
// place must be gone once the server is back — deleted in the background,
// or with the session.
func GiveUpWhileTheServerIsDown[D QueueDriver](t *testing.T, q Queue[D], srv Process) {
	ctx := Context(t, 2*time.Minute)
	holder, waiter := q.Open(t), q.Open(t)
	const name = "down"
	l := Acquire(t, ctx, holder, name, "holder", false)
	defer l.Release(ctx)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := waiter.AcquireWait(wctx, backend.Request{Name: name, Owner: "waiter", TTL: time.Minute})
		errc <- err
	}()
	Eventually(t, 10*time.Second, "the waiter waits", func() bool { return q.Waiting(waiter) == 1 })

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := srv.Resume(); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	cancel()
	start := time.Now()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("AcquireWait = %v, want context.Canceled", err)
		}
		t.Logf("the waiter gave up %v after its ctx ended, with the server down", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("AcquireWait did not return within 10s of its ctx ending while the server was down")
	}
	resume()
	Eventually(t, 30*time.Second, "no waiter left", func() bool {
		n, err := holder.Waiters(ctx, name)
		return err == nil && n == 0
	})
}

// OneReleaseWakesOneWaiter queues n waiters on one name, each through a
// driver of its own (package locker makes one acquisition of a name at a
// time per Client), releases the lock twice, and counts the waiters woken:
// one per release, however many wait — each waits for the one just before
// it only.
func OneReleaseWakesOneWaiter[D QueueDriver](t *testing.T, q Queue[D], n int) {
	ctx := Context(t, 3*time.Minute)
	h := q.Open(t)
	const name = "herd"
	hl := Acquire(t, ctx, h, name, "holder", false)

	ds := make([]D, n)
	for i := range ds {
		ds[i] = q.Open(t)
	}
	sum := func(f func(D) int64) (s int64) {
		for _, d := range ds {
			s += f(d)
		}
		return s
	}
	wctx, cancel := context.WithCancel(ctx)
	grants := make(chan backend.Lease, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i, d := range ds {
		wg.Go(func() {
			l, err := d.AcquireWait(wctx, backend.Request{Name: name, Owner: fmt.Sprint("waiter-", i), TTL: time.Minute})
			switch {
			case err == nil:
				grants <- l
			case !errors.Is(err, context.Canceled):
				t.Errorf("waiter %d: %v", i, err)
			}
		})
	}
	defer func() {
		cancel()
		wg.Wait()
		close(grants)
		for l := range grants {
			_ = l.Release(ctx)
		}
	}()
	Eventually(t, 2*time.Minute, fmt.Sprintf("%d waiters waiting", n), func() bool { return sum(q.Waiting) == int64(n) })
	t.Logf("%d waiters queued in %v", n, time.Since(start).Round(time.Millisecond))
	if k, err := h.Waiters(ctx, name); err != nil || k != n {
		t.Fatalf("Waiters = %d, %v; want %d", k, err, n)
	}
	before := sum(q.Wakeups)
	next := func(what string) backend.Lease {
		t.Helper()
		return Receive(t, grants, 30*time.Second, "a grant after "+what)
	}
	if err := hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	first := next("the holder's release")
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := next("the first waiter's release")
	defer second.Release(ctx)
	Eventually(t, 10*time.Second, "the other waiters waiting", func() bool { return sum(q.Waiting) == int64(n-2) })
	woken := sum(q.Wakeups) - before
	t.Logf("%d waiters, 2 releases: %d wake-ups", n, woken)
	if woken != 2 {
		t.Errorf("2 releases woke waiters %d times, want 2 (one each)", woken)
	}
	if k, err := h.Waiters(ctx, name); err != nil || k != n-2 {
		t.Errorf("Waiters = %d, %v; want %d", k, err, n-2)
	}
}
