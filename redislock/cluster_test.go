package redislock_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/redislock"
)

// TestClusterSlotMigration moves the slot of a held lock to another master
// (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE of its keys, SETSLOT NODE)
// while the lock is renewed and another client keeps trying to take it.
// The hold is kept consistently: renewals follow the slot (ASK, then
// MOVED), nobody else gets the lock meanwhile, Unlock works on the new
// node, a waiter is woken there, and the fencing counter moved with the
// lock, so tokens keep growing.
func TestClusterSlotMigration(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, 2*time.Minute)
	c := cluster.Get(t)
	url := clusterURL(t)
	const ttl = time.Second
	a := openClient(t, url, locker.WithTTL(ttl))
	name := "migrate/" + t.Name()
	ma := locked(t, ctx, a, name)
	tokA := ma.Token()

	p, stop := probe(ctx, openClient(t, url, locker.WithTTL(ttl)).NewMutex(name), ma)
	defer stop()
	// A waiter in a third client, subscribed on whichever node its pub/sub
	// connection reached.
	waiter := openClient(t, url, locker.WithTTL(ttl)).NewMutex(name)
	waited := make(chan error, 1)
	go func() {
		err := waiter.Lock(ctx)
		if err == nil {
			err = waiter.Unlock(ctx)
		}
		waited <- err
	}()

	key := a.Driver().(*redislock.Driver).Key(name)
	from, to := migrateSlot(t, ctx, c, key)
	t.Logf("moved slot %d (%s) from %s to %s", redisserver.KeySlot(key), key, from.Addr, to.Addr)

	// Several leases after the move, the hold is still there.
	end := time.Now().Add(3 * ttl)
	for time.Now().Before(end) {
		select {
		case <-ma.Lost():
			t.Fatal("the hold was reported lost after its slot moved")
		case <-time.After(50 * time.Millisecond):
		}
	}
	p.unlocked.Store(true)
	if err := ma.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the slot moved: %v", err)
	}
	drivertest.Succeeds(t, waited, 30*time.Second, "the waiter's Lock after the Unlock")
	drivertest.Eventually(t, 30*time.Second, "the prober gets the lock", func() bool { return p.grants.Load() > 0 })
	stop()
	if v := p.violations.Load(); v != 0 {
		t.Errorf("the prober got the lock %d times while the owner held it", v)
	}
	if tok := p.token.Load(); tok <= tokA {
		t.Errorf("token after the move %d, not above %d before it: the fence counter did not move with the lock", tok, tokA)
	}
}

// TestClusterALossAfterASlotMoveIsPushed: a held lock's slot moves to
// another master, whose keyspace events the holder's Driver did not
// watch; the Driver follows the slot (go-redis's view of the slots, asked
// again every sweep) and its check after subscribing there finds the key
// deleted on the new master, long before the first renewal.
func TestClusterALossAfterASlotMoveIsPushed(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, 2*time.Minute)
	c := cluster.Get(t)
	a := openClient(t, clusterURL(t), locker.WithTTL(pushTTL))
	name := "migrate/" + t.Name()
	m := locked(t, ctx, a, name)
	key := a.Driver().(*redislock.Driver).Key(name)
	from, to := migrateSlot(t, ctx, c, key)
	t.Logf("moved slot %d (%s) from %s to %s", redisserver.KeySlot(key), key, from.Addr, to.Addr)
	moved := time.Now()
	drivertest.Eventually(t, 30*time.Second, "the key watched on its new master", func() bool {
		return watchers(ctx, to, key) == 1
	})
	t.Logf("watched on the new master %v after the move", time.Since(moved).Round(time.Millisecond))
	start := time.Now()
	if err := del(ctx, to, key); err != nil {
		t.Fatal(err)
	}
	t.Logf("Lost closed %v after the key was deleted on its new master", lostWithin(t, m, start, "after the slot moved").Round(time.Millisecond))
	if err := m.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
		t.Errorf("Unlock of the lost hold = %v, want ErrLost", err)
	}
}

// watchers returns how many connections to srv watch key's keyspace
// events (db 0).
func watchers(ctx context.Context, srv *redisserver.RedisServer, key string) int64 {
	r, err := srv.Do(ctx, "PUBSUB", "NUMSUB", "__keyspace@0__:"+key)
	l, _ := r.([]any)
	if err != nil || len(l) != 2 {
		return -1
	}
	n, _ := l[1].(int64)
	return n
}

// migrateSlot moves the slot of key, with its keys, from its master to
// another one, and returns both.
func migrateSlot(t *testing.T, ctx context.Context, c *redisserver.RedisClusterServer, key string) (from, to *redisserver.RedisServer) {
	t.Helper()
	slot := strconv.Itoa(redisserver.KeySlot(key))
	from, err := c.KeyOwner(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if n.Addr != from.Addr {
			to = n
			break
		}
	}
	id := func(n *redisserver.RedisServer) string {
		r, err := n.Do(ctx, "CLUSTER", "MYID")
		if err != nil {
			t.Fatalf("CLUSTER MYID: %v", err)
		}
		return r.(string)
	}
	fromID, toID := id(from), id(to)
	must := func(n *redisserver.RedisServer, args ...string) any {
		t.Helper()
		r, err := n.Do(ctx, args...)
		if err != nil {
			t.Fatalf("%s %v: %v", n.Addr, args, err)
		}
		return r
	}
	must(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID)
	must(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID)
	host, port, _ := net.SplitHostPort(to.Addr)
	for {
		keys := must(from, "CLUSTER", "GETKEYSINSLOT", slot, "100").([]any)
		if len(keys) == 0 {
			break
		}
		args := []string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}
		for _, k := range keys {
			args = append(args, k.(string))
		}
		must(from, args...)
	}
	for _, n := range []*redisserver.RedisServer{to, from} {
		must(n, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	}
	for _, n := range c.Nodes {
		if n != to && n != from {
			must(n, "CLUSTER", "SETSLOT", slot, "NODE", toID)
		}
	}
	drivertest.Eventually(t, 30*time.Second, "every node agrees on the slot's new owner", func() bool {
		for _, n := range c.Nodes {
			owner, err := (&redisserver.RedisClusterServer{Nodes: []*redisserver.RedisServer{n}}).SlotOwner(ctx, redisserver.KeySlot(key))
			if err != nil || owner.Addr != to.Addr {
				return false
			}
		}
		return true
	})
	return from, to
}
