package redislock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/redislock"
)

// TestWaitReplicas: with wait_replicas=N an acquisition succeeds only once
// N replicas have it; with too few replicas it fails with ErrNotReplicated
// and leaves the lock free.
func TestWaitReplicas(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, time.Minute)
	sentinel := sentinelURL(t) // a master with one replica
	free := func(url, name string) bool {
		m := openClient(t, url).NewMutex(name)
		ok, err := m.TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock: %v", err)
		}
		if ok {
			_ = m.Unlock(ctx)
		}
		return ok
	}

	t.Run("enough_replicas_acknowledge", func(t *testing.T) {
		c := openClient(t, sentinel+"?wait_replicas=1&wait_timeout=2s")
		m := c.NewMutex("wait/enough")
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock with one replica to wait for: %v", err)
		}
		if free(sentinel, "wait/enough") {
			t.Error("the lock is free while held")
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
	// A lock handed to a waiter was written by the releaser's connection:
	// the waiter confirms it on its own before Lock returns.
	handOff := func(t *testing.T, url, query, name string) (*locker.Mutex, error) {
		holder := locked(t, ctx, openClient(t, url), name)
		wc := openClient(t, url+query)
		w := wc.NewMutex(name)
		got := queued(t, ctx, w, wc, 1)
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		return w, awaitLock(t, got, "the waiter")
	}
	t.Run("a_handed_lock_is_confirmed_on_the_replicas", func(t *testing.T) {
		w, err := handOff(t, sentinel, "?wait_replicas=1&wait_timeout=2s", "wait/handed")
		if err != nil {
			t.Fatalf("waiter's Lock: %v", err)
		}
		if free(sentinel, "wait/handed") {
			t.Error("the lock is free while held")
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a_handed_lock_without_replicas_is_passed_on", func(t *testing.T) {
		w, err := handOff(t, standaloneURL(t), "?wait_replicas=1&wait_timeout=100ms", "wait/handed-none")
		if !errors.Is(err, redislock.ErrNotReplicated) {
			t.Fatalf("waiter's Lock = %v; want ErrNotReplicated", err)
		}
		if w.HoldCount() != 0 {
			t.Errorf("HoldCount = %d", w.HoldCount())
		}
		if !free(standaloneURL(t), "wait/handed-none") {
			t.Error("the lock is held after the hand-off failed for want of replicas")
		}
	})
	for _, tc := range []struct{ name, url, query string }{
		{"more_replicas_than_there_are", sentinel, "?wait_replicas=2&wait_timeout=100ms"},
		{"a_standalone_server_has_none", standaloneURL(t), "?wait_replicas=1&wait_timeout=100ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := openClient(t, tc.url+tc.query).NewMutex("wait/" + tc.name)
			start := time.Now()
			ok, err := m.TryLock(ctx)
			if ok || !errors.Is(err, redislock.ErrNotReplicated) {
				t.Fatalf("TryLock = %v, %v; want ErrNotReplicated", ok, err)
			}
			t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))
			if err := m.Lock(ctx); !errors.Is(err, redislock.ErrNotReplicated) {
				t.Errorf("Lock = %v; want ErrNotReplicated, not a wait", err)
			}
			if !free(tc.url, "wait/"+tc.name) {
				t.Error("the lock is held after the acquisition failed for want of replicas")
			}
			if m.HoldCount() != 0 {
				t.Errorf("HoldCount = %d", m.HoldCount())
			}
		})
	}
}
