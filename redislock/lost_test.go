package redislock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver/redisserver"
)

// TestDeletedKeyIsFoundByTheNextRenewal: Redis does not push a deleted
// key's news, so the holder learns at its next renewal (within the TTL):
// Lost closes, and Unlock reports ErrLost without touching the next owner.
func TestDeletedKeyIsFoundByTheNextRenewal(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, time.Minute)
	url := standaloneURL(t)
	const ttl = 600 * time.Millisecond
	c := openClient(t, url, locker.WithTTL(ttl))
	name := "lost/" + t.Name()
	m := locked(t, ctx, c, name)
	dropHold(t, ctx, c, name)
	deleted := time.Now()
	select {
	case <-m.Lost():
		t.Logf("Lost closed %v after the key was deleted (TTL %v)", time.Since(deleted).Round(time.Millisecond), ttl)
	case <-time.After(ttl + 3*time.Second):
		t.Fatal("Lost did not close after the lock key was deleted")
	}
	next := openClient(t, url).NewMutex(name)
	if ok, err := next.TryLock(ctx); !ok || err != nil {
		t.Fatalf("TryLock by the next owner = %v, %v", ok, err)
	}
	if err := m.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
		t.Errorf("Unlock after the key was deleted = %v, want ErrLost", err)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Errorf("the next owner's Unlock = %v: the stale Unlock touched its lock", err)
	}
}

// TestTryLockWithTheServerDownNamesTheCause: a TryLock whose server is gone
// returns with the dial error (the server's address and the store's own
// error, reachable with errors.As), by its ctx's end and the clean-up of a
// call that may have been sent (cleanupTimeout, 2s).
func TestTryLockWithTheServerDownNamesTheCause(t *testing.T) {
	t.Parallel()
	srv := redisserver.Redis(t)
	ctx := drivertest.Context(t, time.Minute)
	c, err := locker.Open(ctx, "redis://"+srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	const bound = 1500 * time.Millisecond
	tctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	start := time.Now()
	_, err = c.NewMutex("down").TryLock(tctx)
	took := time.Since(start)
	var oe *net.OpError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), srv.Addr) {
		t.Fatalf("TryLock with the server down = %v, want the dial error naming %s", err, srv.Addr)
	}
	if took > bound+2*time.Second+time.Second {
		t.Errorf("TryLock with a %v ctx returned after %v: %v", bound, took, err)
	}
}
