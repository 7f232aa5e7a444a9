package locallock

// Driver-level tests of what the conformance suite does not reach: the
// Store's bookkeeping, grant races, and mem:// namespaces. Internal, to
// reach the Store's lock in the grant race.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

const ttl = time.Minute // long enough never to expire by accident

func TestStoreFreesIdleNames(t *testing.T) {
	ctx := testCtx(t)
	s := NewStore()
	d := New(s)
	l := mustAcquire(t, ctx, d, "idle", ttl)

	// Waiters that give up leave no state behind once the holder is gone.
	wctx, cancel := context.WithCancel(ctx)
	errs := make(chan error, 3)
	for i := range 3 {
		go func() {
			_, err := d.AcquireWait(wctx, backend.Request{Name: "idle", Owner: fmt.Sprint("w", i), TTL: ttl})
			errs <- err
		}()
	}
	awaitWaiters(t, ctx, d, "idle", 3)
	cancel()
	for range 3 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Errorf("a waiter that gave up = %v, want context.Canceled", err)
		}
	}
	if n := s.Len(); n != 1 {
		t.Errorf("Len with one holder = %d, want 1", n)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Names that are released, or expire, are freed too.
	for i := range 100 {
		if err := mustAcquire(t, ctx, d, fmt.Sprint("many/", i), ttl).Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	expiring := mustAcquire(t, ctx, d, "expiring", 20*time.Millisecond)
	awaitLost(t, expiring)
	wantEmpty(t, s, "after every holder released and every waiter gave up")
}

// A waiter whose ctx ends while the lock is being handed to it must pass the
// lock on to the next waiter, not keep it or drop it.
func TestCancelledWaiterGrantedHandsTheLockOn(t *testing.T) {
	ctx := testCtx(t)
	s := NewStore()
	d := New(s)
	holder := mustAcquire(t, ctx, d, "race", ttl)

	first, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	firstDone := make(chan error, 1)
	go func() {
		l, err := d.AcquireWait(first, backend.Request{Name: "race", Owner: "first", TTL: ttl})
		if err == nil {
			// Granted before it saw the cancellation: allowed, but then
			// it is ours to give back.
			err = l.Release(ctx)
		}
		firstDone <- err
	}()
	awaitWaiters(t, ctx, d, "race", 1)
	secondDone := make(chan backend.Lease, 1)
	go func() {
		l, err := d.AcquireWait(ctx, backend.Request{Name: "race", Owner: "second", TTL: ttl})
		if err != nil {
			t.Errorf("the second waiter: %v", err)
		}
		secondDone <- l
	}()
	awaitWaiters(t, ctx, d, "race", 2)

	// Cancel the first waiter and grant it the lock while it cannot yet
	// take the Store's lock to withdraw: it wakes to both at once. The
	// pause lets it reach the lock; if it has not, it sees the grant and
	// its ctx together, which must end the same way.
	s.mu.Lock()
	cancelFirst()
	time.Sleep(20 * time.Millisecond)
	s.vacate(holder.(*lease).e)
	s.mu.Unlock()

	if err := <-firstDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled waiter = %v, want context.Canceled", err)
	}
	select {
	case l := <-secondDone:
		if l == nil {
			t.FailNow()
		}
		hs, _ := d.Holds(ctx, "race")
		if len(hs) != 1 || hs[0].Owner != "second" {
			t.Errorf("Holds = %+v, want the second waiter only", hs)
		}
		if err := l.Release(ctx); err != nil {
			t.Error(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the next waiter was not granted the lock")
	}
	wantEmpty(t, s, "after the race")
}

func TestExpiredLease(t *testing.T) {
	ctx := testCtx(t)
	d := New(nil)
	l := mustAcquire(t, ctx, d, "expired", 20*time.Millisecond)
	awaitLost(t, l)
	if err := l.Renew(ctx, ttl); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Renew after expiry = %v, want ErrLost", err)
	}
	if err := l.Release(ctx); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Release after expiry = %v, want ErrLost", err)
	}
}

func TestInspector(t *testing.T) {
	ctx := testCtx(t)
	d := New(nil)
	for _, n := range []string{"jobs/b", "jobs/a", "jobsx", "orders/1"} {
		l := mustAcquire(t, ctx, d, n, ttl)
		t.Cleanup(func() { _ = l.Release(context.Background()) })
	}
	t.Run("Holds_lists_the_names_with_the_prefix_sorted", func(t *testing.T) {
		hs, err := d.Holds(ctx, "jobs/")
		if err != nil || len(hs) != 2 || hs[0].Name != "jobs/a" || hs[1].Name != "jobs/b" {
			t.Fatalf("Holds(jobs/) = %+v, %v; want jobs/a, jobs/b", hs, err)
		}
		if h := hs[0]; h.Owner != "owner-jobs/a" || h.Token == 0 || time.Until(h.Expires) <= 0 {
			t.Errorf("Holds(jobs/)[0] = %+v, want its owner, a token and a future expiry", h)
		}
		if all, _ := d.Holds(ctx, ""); len(all) != 4 {
			t.Errorf("Holds(\"\") = %+v, want 4", all)
		}
	})
	t.Run("ForceRelease_of_a_free_lock_is_ErrNotHeld", func(t *testing.T) {
		for _, n := range []string{"free", "jobs/"} {
			if err := d.ForceRelease(ctx, n); !errors.Is(err, backend.ErrNotHeld) {
				t.Errorf("ForceRelease(%q) = %v, want ErrNotHeld", n, err)
			}
		}
	})
}

func TestClosedDriver(t *testing.T) {
	ctx := testCtx(t)
	s := NewStore()
	holder := mustAcquire(t, ctx, New(s), "closed", ttl)
	d := New(s)
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := d.AcquireWait(ctx, backend.Request{Name: "closed", Owner: fmt.Sprint("w", i), TTL: ttl})
			errs <- err
		}()
	}
	awaitWaiters(t, ctx, d, "closed", 2)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, backend.ErrClosed) {
				t.Errorf("a wait ended by Close = %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not end a wait")
		}
	}
	if _, err := d.Acquire(ctx, backend.Request{Name: "other", Owner: "late", TTL: ttl}); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
	if n, _ := d.Waiters(ctx, "closed"); n != 0 {
		t.Errorf("Waiters after Close = %d, want 0", n)
	}
	if err := holder.Release(ctx); err != nil {
		t.Errorf("the holder on another Driver: Release = %v", err)
	}
	wantEmpty(t, s, "after Close and the last release")
}

func TestMemURLs(t *testing.T) {
	ctx := testCtx(t)
	mutexAt := func(raw string) *locker.Mutex {
		t.Helper()
		c, err := locker.Open(ctx, raw)
		if err != nil {
			t.Fatalf("Open(%q): %v", raw, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c.NewMutex("mem-urls")
	}
	for _, tc := range []struct {
		name   string
		a, b   string
		shared bool
	}{
		{"the_same_namespace_shares_locks", "mem://mem-urls-a", "mem://mem-urls-a", true},
		{"namespaces_ignore_case", "mem://Mem-Urls-B", "MEM://mem-urls-b", true},
		{"the_default_namespace_is_shared", "mem://", "mem:///", true},
		{"different_namespaces_do_not_share", "mem://mem-urls-c", "mem://mem-urls-d", false},
		{"a_namespace_is_not_the_default", "mem://mem-urls-e", "mem://", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := mutexAt(tc.a), mutexAt(tc.b)
			if err := a.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			defer a.Unlock(ctx)
			if ok, err := b.TryLock(ctx); err != nil || ok == tc.shared {
				t.Errorf("TryLock in %s while %s holds = %v, %v; want %v", tc.b, tc.a, ok, err, !tc.shared)
			} else if ok {
				_ = b.Unlock(ctx)
			}
		})
	}
	t.Run("the_opener_rejects_what_mem_does_not_use", func(t *testing.T) {
		for _, raw := range []string{"mem:ns", "mem://ns/p", "mem://ns:1", "mem://u@ns", "mem://u:p@ns", "mem://?x=1"} {
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := open(context.Background(), u); !errors.Is(err, backend.ErrBadURL) {
				t.Errorf("open(%q) = %v, want ErrBadURL", raw, err)
			}
		}
	})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustAcquire(t *testing.T, ctx context.Context, d *Driver, name string, ttl time.Duration) backend.Lease {
	t.Helper()
	l, err := d.Acquire(ctx, backend.Request{Name: name, Owner: "owner-" + name, TTL: ttl})
	if err != nil {
		t.Fatalf("Acquire(%s): %v", name, err)
	}
	return l
}

// awaitLost waits for l, a lease left to expire, to be lost.
func awaitLost(t *testing.T, l backend.Lease) {
	t.Helper()
	select {
	case <-l.Lost().C():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost did not close when the lease expired")
	}
}

// wantEmpty fails t unless s keeps no name, when what happened.
func wantEmpty(t *testing.T, s *Store, when string) {
	t.Helper()
	if n := s.Len(); n != 0 {
		t.Errorf("Len %s = %d, want 0", when, n)
	}
}

func awaitWaiters(t *testing.T, ctx context.Context, d *Driver, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if got, _ := d.Waiters(ctx, name); got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters for %s not reached within 5s", n, name)
		}
		time.Sleep(time.Millisecond)
	}
}
