package redislock_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver/redisserver"
)

// scriptCommands are the commands the Lua scripts run: INFO commandstats
// counts them too, but they are part of one EVALSHA, not round trips.
var scriptCommands = map[string]bool{
	"exists": true, "pttl": true, "incr": true, "hset": true, "pexpire": true,
	"hget": true, "hmget": true, "del": true, "publish": true, "info": true,
	"time": true, "lindex": true, "lpop": true, "hdel": true, "hexists": true,
	"rpush": true, "lrem": true, "lrange": true,
}

// commandCalls returns the calls of each command the clients sent to srv
// (INFO commandstats), without the commands run inside scripts.
func commandCalls(t *testing.T, ctx context.Context, srv *redisserver.RedisServer) map[string]int64 {
	t.Helper()
	r, err := srv.Do(ctx, "INFO", "commandstats")
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(r.(string), "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd || scriptCommands[name] {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				out[name], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return out
}

func diffCalls(before, after map[string]int64) (total int64, per map[string]int64) {
	per = map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			per[k] = d
			total += d
		}
	}
	return total, per
}

func formatCalls(per map[string]int64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(per)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, per[k]))
	}
	return strings.Join(parts, " ")
}

// open returns a Client on url, closed when the test ends.
func openClient(t *testing.T, url string, opts ...locker.Option) *locker.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := locker.Open(ctx, url, opts...)
	if err != nil {
		t.Fatalf("locker.Open(%s): %v", url, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// ownServer starts a test that counts on a Redis server of its own (the
// counts are server-wide): its ctx, the server, and a function that opens
// a Client on it with leases of a minute.
func ownServer(t *testing.T) (context.Context, *redisserver.RedisServer, func() *locker.Client) {
	t.Helper()
	srv := redisserver.Redis(t)
	return drivertest.Context(t, 2*time.Minute), srv, func() *locker.Client {
		return openClient(t, "redis://"+srv.Addr, locker.WithTTL(time.Minute))
	}
}

// TestCommandsPerAcquisition counts the commands that 8 handles of one
// Client send to take one lock 500 times between them. Only the Client's
// first waiter asks Redis, and a hold ends by being passed to the next
// waiter without a call (backend.Passer), so most acquisitions cost no
// command at all: Redis sees the chain's first grant, a reservation of
// tokens every 32 passes, a release and a new grant when the chain's lease
// is a tenth of the TTL old, and the Driver's one SUBSCRIBE. Without
// passing it is 3 (acquire, INCRBY, release). The Client's waiters never
// wait in Redis here (only the Client's head asks, and finds the lock
// free), so this also shows that passing does not need another process's
// waiter to have made the Driver subscribe.
func TestCommandsPerAcquisition(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, 2*time.Minute)
	srv := redisserver.Redis(t) // its own server: the counts are server-wide
	c := openClient(t, "redis://"+srv.Addr, locker.WithTTL(10*time.Second))
	const handles, total = 8, 500
	name := "commands"
	warm := locked(t, ctx, c, name) // loads the scripts and opens a connection
	if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	before := commandCalls(t, ctx, srv)
	drivertest.TakeTurns(t, ctx, c, name, handles, total)
	sum, per := diffCalls(before, commandCalls(t, ctx, srv))
	perAcq := float64(sum) / total
	t.Logf("%d acquisitions by %d handles: %d commands, %.2f per acquisition (release included): %s",
		total, handles, sum, perAcq, formatCalls(per))
	if perAcq > 1 {
		t.Errorf("%.2f commands per acquisition, want at most 1: holds are not passed within the Client", perAcq)
	}
}

// TestOneReleaseWakesOneLocalWaiter: 16 handles of one process wait for a
// lock; a release hands it to the oldest, which returns without another
// call: the release is the only script run between the release and the
// grant (none, once the Driver holds the lock and passes it on), not 16
// tries. The waiters renew their places once a second, which may fall
// into one window by chance; a herd would fill every window, so the best
// of 3 releases is checked.
func TestOneReleaseWakesOneLocalWaiter(t *testing.T) {
	t.Parallel()
	ctx, srv, newClient := ownServer(t)
	holderC, waitC := newClient(), newClient()
	q := waitC.Driver().(backend.QueueInspector)
	name := "herd"
	// Load the scripts, so that no NOSCRIPT fallback blurs the counts.
	warm := locked(t, ctx, holderC, "warm")
	if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	holder := locked(t, ctx, holderC, name)

	const n = 16
	granted := make(chan *locker.Mutex, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	for range n {
		m := waitC.NewMutex(name)
		wg.Go(func() {
			if err := m.Lock(ctx); err != nil {
				t.Errorf("waiter: %v", err)
				return
			}
			granted <- m
		})
	}
	// The Client keeps its waiters: one in Redis, the others in the Client.
	awaitLocalWaiters(t, waitC, name, n)
	awaitWaiters(t, ctx, waitC, name, 1)
	next := func() *locker.Mutex {
		select {
		case m := <-granted:
			return m
		case <-ctx.Done():
			t.Fatal("no waiter got the lock")
			return nil
		}
	}
	best := int64(n)
	var all []int64
	for round := range n {
		before := commandCalls(t, ctx, srv)
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		holder = next()
		if round >= 3 {
			continue
		}
		_, per := diffCalls(before, commandCalls(t, ctx, srv))
		calls := per["evalsha"] + per["eval"] // the release, if the lock was not passed
		all = append(all, calls)
		best = min(best, calls)
		if k := waitC.LocalWaiters(name); k != n-1-round {
			t.Errorf("LocalWaiters = %d after grant %d, want %d", k, round+1, n-1-round)
		}
		if k, _ := q.Waiters(ctx, name); k != 0 {
			t.Errorf("Waiters in Redis = %d after grant %d, want 0: the Client's waiters wait in it", k, round+1)
		}
		if holder.HoldCount() != 1 {
			t.Errorf("the granted waiter's HoldCount = %d", holder.HoldCount())
		}
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("script calls from a release to its grant, in 3 rounds with %d local waiters: %v", n, all)
	if best > 1 {
		t.Errorf("at best %d script calls from a release to its grant, want the release alone", best)
	}
}

// TestOneSubscriptionPerDriver: waiters on 10 names, on two Drivers, all
// get their locks by hand-off, while each Driver is subscribed to one
// channel (its inbox), whatever the number of names; Close unsubscribes.
func TestOneSubscriptionPerDriver(t *testing.T) {
	t.Parallel()
	ctx, srv, newClient := ownServer(t)
	holderC := newClient()
	waitCs := []*locker.Client{newClient(), newClient()}
	channels := func() int {
		r, err := srv.Do(ctx, "PUBSUB", "CHANNELS", "golocker:*")
		if err != nil {
			t.Fatalf("PUBSUB CHANNELS: %v", err)
		}
		return len(r.([]any))
	}

	const n = 10
	var holders []*locker.Mutex
	for i := range n {
		m := locked(t, ctx, holderC, fmt.Sprintf("names/%d", i))
		holders = append(holders, m)
	}
	got := make(chan error, 2*n)
	for i := range n {
		for _, c := range waitCs {
			m := c.NewMutex(fmt.Sprintf("names/%d", i))
			go func() {
				err := m.Lock(ctx)
				if err == nil {
					err = m.Unlock(ctx)
				}
				got <- err
			}()
		}
	}
	for i := range n {
		awaitWaiters(t, ctx, holderC, fmt.Sprintf("names/%d", i), 2)
	}
	if k := channels(); k != 2 {
		t.Errorf("%d channels subscribed by 2 Drivers waiting on %d names, want 2", k, n)
	}
	for _, m := range holders {
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 * n {
		select {
		case err := <-got:
			if err != nil {
				t.Errorf("waiter: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("not every waiter got its lock")
		}
	}
	for _, c := range waitCs {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	drivertest.Eventually(t, 30*time.Second, "every channel unsubscribed", func() bool { return channels() == 0 })
}
