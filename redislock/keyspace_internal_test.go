package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/testserver/redisserver"
)

// TestACheckFiresOnlyAHoldThatRedisNoLongerHas drives the watcher's check
// by hand, as an event would: a "del" of the Driver's released hold that
// arrives after it holds the name again fires nothing; a deletion of the
// new hold fires it; and a hold granted later is not fired for the
// deletion before it.
func TestACheckFiresOnlyAHoldThatRedisNoLongerHas(t *testing.T) {
	srv := redisserver.RedisWith(t, redisserver.RedisOptions{Args: []string{"--notify-keyspace-events", "Kgx"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bd, err := Open(ctx, "redis://"+srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer bd.Close()
	d := bd.(*Driver)
	if d.watch == nil {
		t.Fatal("the Driver does not watch its keys on a server with keyspace events")
	}
	acquire := func(owner string) backend.Lease {
		t.Helper()
		l, err := d.Acquire(ctx, backend.Request{Name: "n", Owner: owner, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	key := d.Key("n")
	suspectAndCheck := func() {
		t.Helper()
		d.watch.suspectKey(key)
		if !d.watch.check() {
			t.Fatal("the check failed")
		}
	}

	old := acquire("a")
	if err := old.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cur := acquire("b")
	suspectAndCheck() // the released hold's "del", read late
	if cur.Lost().Fired() || old.Lost().Fired() {
		t.Fatalf("a check after the name was held again fired: the new hold %v, the released one %v", cur.Lost().Fired(), old.Lost().Fired())
	}

	if _, err := srv.Do(ctx, "DEL", key); err != nil {
		t.Fatal(err)
	}
	suspectAndCheck()
	if !cur.Lost().Fired() {
		t.Fatal("a check after the hold's key was deleted did not fire it")
	}

	next := acquire("c")
	suspectAndCheck() // the DEL's event, read late
	if next.Lost().Fired() {
		t.Error("the hold granted after the DEL was fired for it")
	}
	if err := next.Release(ctx); err != nil {
		t.Error(err)
	}
}
