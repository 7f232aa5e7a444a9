// Package drivertest holds what the tests of more than one driver share
// and the conformance suite cannot do for them: the TestMain of a package
// that starts servers, the polling and acquiring helpers of driver-level
// tests, and the checks of a wait queue that need hooks into a driver's
// internals or into its server's process (queue.go). It is for tests only;
// it imports no store's client, so no driver module gains a dependency.
package drivertest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/testserver"
)

// Main runs the tests of m with the servers they share, and then, if they
// passed, fails the run when a goroutine is left running: every client is
// closed by then, so nothing is ignored. It returns the exit code:
//
//	func TestMain(m *testing.M) { os.Exit(drivertest.Main(m, &servers)) }
func Main(m *testing.M, servers *testserver.Shared) int {
	code := servers.Main(m)
	if code == 0 {
		if err := noGoroutinesLeft(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	return code
}

// leakGrace bounds how long a closed client's goroutines may take to end:
// go-redis's pool, after failed dials, probes in a goroutine that sees the
// pool closed only after its current dial and a second's sleep.
const leakGrace = 10 * time.Second

// noGoroutinesLeft is goleak.Find (which looks for about 1.5 s), again
// until leakGrace has passed.
func noGoroutinesLeft() error {
	deadline := time.Now().Add(leakGrace)
	for {
		err := goleak.Find()
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// Context returns a context that ends after d, a generous bound on the
// test, or when the test ends.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond until it is true, and fails the test when it is
// still false after d.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Receive returns the next value of ch, the result of a goroutine the test
// started, and fails the test when none comes within d.
func Receive[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s: nothing within %v", what, d)
		var zero T
		return zero
	}
}

// Succeeds fails the test unless ch, the outcome of a goroutine the test
// started, gives nil within d.
func Succeeds(t testing.TB, ch <-chan error, d time.Duration, what string) {
	t.Helper()
	if err := Receive(t, ch, d, what); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Open opens a driver with open, given 30 seconds, and closes it when the
// test ends; what names it in the failure.
func Open[D backend.Driver](t testing.TB, what string, open func(context.Context) (D, error)) D {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := open(ctx)
	if err != nil {
		t.Fatalf("Open(%s): %v", what, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// Acquire takes name on d for owner with a one-minute lease, waiting in
// the store's queue (backend.Waiter) or not, or fails the test.
func Acquire(t testing.TB, ctx context.Context, d backend.Driver, name, owner string, wait bool) backend.Lease {
	t.Helper()
	acq := d.Acquire
	if wait {
		w, ok := d.(backend.Waiter)
		if !ok {
			t.Fatalf("%T does not implement backend.Waiter", d)
		}
		acq = w.AcquireWait
	}
	l, err := acq(ctx, backend.Request{Name: name, Owner: owner, TTL: time.Minute})
	if err != nil {
		t.Fatalf("Acquire(%s, %s): %v", name, owner, err)
	}
	return l
}

// Client opens a Client of url through locker.Open, as configuration
// would, closed when the test ends.
func Client(t testing.TB, ctx context.Context, url string) *locker.Client {
	t.Helper()
	c, err := locker.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// LockOnce opens a Client of url through locker.Open, as configuration
// would, and takes and releases one lock with it.
func LockOnce(t testing.TB, ctx context.Context, url string) {
	t.Helper()
	m := Client(t, ctx, url).NewMutex("open")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TakeTurns has handles Mutexes of c on name lock and unlock it, total
// times in all, and fails the test when two are inside at once or, with a
// driver that declares Fencing, when a token is not above the one before.
func TakeTurns(t testing.TB, ctx context.Context, c *locker.Client, name string, handles, total int) {
	t.Helper()
	fencing := c.Driver().Capabilities().Fencing
	var mu sync.Mutex // held inside: TryLock failing means two are inside
	var last uint64
	var done atomic.Int64
	var wg sync.WaitGroup
	for range handles {
		m := c.NewMutex(name)
		wg.Go(func() {
			for done.Add(1) <= int64(total) {
				if err := m.Lock(ctx); err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				if !mu.TryLock() {
					t.Error("two handles inside at once")
				} else {
					if tok := m.Token(); fencing && tok <= last {
						t.Errorf("token %d after %d", tok, last)
					}
					last = m.Token()
					mu.Unlock()
				}
				if err := m.Unlock(ctx); err != nil {
					t.Errorf("Unlock: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}
