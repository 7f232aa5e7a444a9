package redislock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/redislock"
)

// TestRedLockMajority: a lock needs a majority of the instances. Losing
// one of three changes nothing; losing two makes acquisitions fail with an
// error (not "held", not a hang); tokens are 0.
func TestRedLockMajority(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, time.Minute)
	rs := redisserver.RedisInstances(t, 3) // its own: the test kills two of them
	c := openClient(t, redlockURLOf(rs), locker.WithTTL(2*time.Second))
	m := c.NewMutex("majority")
	lockUnlock := func() error {
		if err := m.Lock(ctx); err != nil {
			return err
		}
		if m.Token() != 0 {
			t.Errorf("RedLock Token = %d, want 0", m.Token())
		}
		return m.Unlock(ctx)
	}
	if err := lockUnlock(); err != nil {
		t.Fatalf("with every instance: %v", err)
	}
	if err := rs[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := lockUnlock(); err != nil {
		t.Fatalf("with one instance of three down: %v", err)
	}
	// A hold taken with two instances survives renewals.
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Lost():
		t.Fatal("a hold on two instances of three was lost")
	case <-time.After(3 * time.Second):
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock on two instances of three: %v", err)
	}
	if err := rs[1].Kill(); err != nil {
		t.Fatal(err)
	}
	ok, err := m.TryLock(ctx)
	if ok || err == nil || errors.Is(err, locker.ErrLost) {
		t.Fatalf("TryLock with two instances of three down = %v, %v; want an error", ok, err)
	}
	t.Logf("with two instances down: %v", err)
}

// TestRedLockUndoesAFailedQuorum: when only a minority grants the lock,
// those grants are released at once instead of blocking the name until
// they expire.
func TestRedLockUndoesAFailedQuorum(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, time.Minute)
	rs := instances.Get(t)
	d := openAny(t, redlockURLOf(rs)).(*redislock.RedLock)
	name := "undo/" + t.Name()
	key := d.Key(name)
	// Another owner holds the lock on two instances of three.
	for _, r := range rs[:2] {
		if _, err := r.Do(ctx, "HSET", key, "owner", "someone-else", "token", "0"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Do(ctx, "PEXPIRE", key, "60000"); err != nil {
			t.Fatal(err)
		}
	}
	m := openClient(t, redlockURLOf(rs)).NewMutex(name)
	if ok, err := m.TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock against a majority held elsewhere = %v, %v; want false, nil", ok, err)
	}
	if n, err := rs[2].Do(ctx, "EXISTS", key); err != nil || n != int64(0) {
		t.Errorf("EXISTS on the instance that granted = %v, %v; want 0: the minority grant was not released", n, err)
	}
	for _, r := range rs[:2] {
		_ = del(ctx, r, key)
	}
	if ok, err := m.TryLock(ctx); !ok || err != nil {
		t.Fatalf("TryLock once free = %v, %v", ok, err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
