package keyspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/redisserver"
)

// events is a server that publishes the keyspace events a Watcher needs.
var (
	servers testserver.Shared
	events  = testserver.NewLazy(&servers, func(t testserver.TB) *redisserver.RedisServer {
		return redisserver.RedisWith(t, redisserver.RedisOptions{Args: []string{"--notify-keyspace-events", "Kgx"}})
	})
)

func TestMain(m *testing.M) { os.Exit(drivertest.Main(m, &servers)) }

// hold is a Hold of the tests: one owner in Redis.
type hold struct {
	owner string
	lost  *backend.LostSignal
}

func newHold(owner string) *hold { return &hold{owner: owner, lost: backend.NewLostSignal()} }

func (h *hold) RedisOwner() string        { return h.owner }
func (h *hold) Lost() *backend.LostSignal { return h.lost }

// watcher returns a Watcher on srv, closed when the test ends, a client,
// and the holds it reported gone.
func watcher(t *testing.T, srv *redisserver.RedisServer) (*Watcher, *redis.Client, func() []Hold) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	var mu sync.Mutex
	var gone []Hold
	w := New(c, func(h Hold) { mu.Lock(); gone = append(gone, h); mu.Unlock() })
	t.Cleanup(func() {
		w.Close()
		_ = c.Close()
	})
	return w, c, func() []Hold { mu.Lock(); defer mu.Unlock(); return append([]Hold(nil), gone...) }
}

// grant writes the hash of a hold of owner, as the acquire script does.
func grant(t *testing.T, ctx context.Context, c *redis.Client, key, owner string) {
	t.Helper()
	if err := c.HSet(ctx, key, "owner", owner, "token", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.PExpire(ctx, key, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
}

func uniqueKey(t *testing.T) string {
	return fmt.Sprintf("golocker:{%s/%d}", t.Name(), time.Now().UnixNano())
}

// TestACheckFiresOnlyAHoldThatRedisNoLongerHas drives the check by hand,
// as an event would: a "del" of a released hold that arrives after the
// key is held again fires nothing; a deletion of the new hold fires it;
// and a hold granted later is not fired for the deletion before it.
func TestACheckFiresOnlyAHoldThatRedisNoLongerHas(t *testing.T) {
	ctx := drivertest.Context(t, time.Minute)
	w, c, gone := watcher(t, events.Get(t))
	key := uniqueKey(t)
	suspectAndCheck := func() {
		t.Helper()
		w.suspectKey(key)
		if !w.check() {
			t.Fatal("the check failed")
		}
	}
	old := newHold("a")
	grant(t, ctx, c, key, "a")
	w.Watch(key, old)
	w.Unwatch(key, old)
	cur := newHold("b")
	grant(t, ctx, c, key, "b")
	w.Watch(key, cur)
	suspectAndCheck() // the released hold's "del", read late
	if cur.lost.Fired() || old.lost.Fired() {
		t.Fatalf("a check after the key was held again fired: the new hold %v, the released one %v", cur.lost.Fired(), old.lost.Fired())
	}
	if err := c.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	suspectAndCheck()
	if !cur.lost.Fired() {
		t.Fatal("a check after the hold's key was deleted did not fire it")
	}
	if g := gone(); len(g) != 1 || g[0] != Hold(cur) {
		t.Errorf("gone = %v, want the deleted hold", g)
	}
	next := newHold("c")
	grant(t, ctx, c, key, "c")
	w.Watch(key, next)
	suspectAndCheck() // the DEL's event, read late
	if next.lost.Fired() {
		t.Error("the hold granted after the DEL was fired for it")
	}
}

// TestADeletedKeyFiresItsHold: a watched hold whose key is deleted is
// fired through the events, and a hold passed on from it fires in its
// place; a key written over by another owner fires too.
func TestADeletedKeyFiresItsHold(t *testing.T) {
	ctx := drivertest.Context(t, time.Minute)
	w, c, _ := watcher(t, events.Get(t))
	key, other := uniqueKey(t), uniqueKey(t)+"x"
	first := newHold("a")
	grant(t, ctx, c, key, "a")
	w.Watch(key, first)
	passed := &hold{owner: "a", lost: backend.NewLostSignal()} // a chain's: Redis has its first owner
	w.Pass(key, first, passed)
	grant(t, ctx, c, other, "b")
	o := newHold("b")
	w.Watch(other, o)
	if err := c.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	grant(t, ctx, c, other, "someone else")
	drivertest.Eventually(t, time.Minute, "the passed hold fired", passed.lost.Fired)
	drivertest.Eventually(t, time.Minute, "the written-over hold fired", o.lost.Fired)
	if first.lost.Fired() {
		t.Error("the hold that passed its key on was fired")
	}
}

// TestAPassOfAFiredHoldIsFired: a hold passed on after Redis lost the
// chain's hold is lost too.
func TestAPassOfAFiredHoldIsFired(t *testing.T) {
	w, _, _ := watcher(t, events.Get(t))
	key := uniqueKey(t)
	from, next := newHold("a"), newHold("a")
	w.Watch(key, from)
	from.lost.Fire()
	w.Pass(key, from, next)
	if !next.lost.Fired() {
		t.Error("a pass of a fired hold is not fired")
	}
}

// TestPublished: a server with Kgx (or KA) publishes what a Watcher
// needs, one with the default setting does not; asked for the events, a
// server without them is an error; told not to watch, no server is asked.
func TestPublished(t *testing.T) {
	ctx := drivertest.Context(t, time.Minute)
	on := redis.NewClient(&redis.Options{Addr: events.Get(t).Addr})
	defer on.Close()
	off := redis.NewClient(&redis.Options{Addr: redisserver.RedisWith(t, redisserver.RedisOptions{}).Addr})
	defer off.Close()
	yes, no := true, false
	for _, tc := range []struct {
		name   string
		c      *redis.Client
		opt    *bool
		want   bool
		errors bool
	}{
		{"on, asked", on, nil, true, false},
		{"on, told", on, &yes, true, false},
		{"on, told not to", on, &no, false, false},
		{"off, asked", off, nil, false, false},
		{"off, told", off, &yes, false, true},
	} {
		got, err := Published(ctx, tc.c, tc.opt)
		if got != tc.want || (err != nil) != tc.errors {
			t.Errorf("%s: Published = %v, %v; want %v, error %v", tc.name, got, err, tc.want, tc.errors)
		}
		if err != nil && !errors.Is(err, backend.ErrInvalidOption) {
			t.Errorf("%s: %v, want an invalid option", tc.name, err)
		}
	}
	for flags, want := range map[string]bool{"Kgx": true, "KA": true, "AK": true, "Kg": false, "Egx": false, "": false, "KEA": true} {
		if publishes(flags) != want {
			t.Errorf("publishes(%q) = %v, want %v", flags, !want, want)
		}
	}
}
