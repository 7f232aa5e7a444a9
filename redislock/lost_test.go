package redislock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/redislock"
)

// TestDeletedKeyIsFoundByTheNextRenewal: Redis does not push a deleted
// key's news, so the holder learns at its next renewal (within the TTL):
// Lost closes, and Unlock reports ErrLost without touching the next owner.
func TestDeletedKeyIsFoundByTheNextRenewal(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	srv := standalone.Get(t)
	url := standaloneURL(t)
	const ttl = 600 * time.Millisecond
	c := openClient(t, url, locker.WithTTL(ttl))
	name := "lost/" + t.Name()
	m := c.NewMutex(name)
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	key := c.Driver().(*redislock.Driver).Key(name)
	if err := del(ctx, srv, key); err != nil {
		t.Fatal(err)
	}
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
