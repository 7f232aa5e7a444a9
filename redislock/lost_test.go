package redislock_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/redislock"
)

// pushTTL is the lease of the tests of pushed losses: its first renewal
// comes after pushTTL/3, so a loss told within half of that was pushed,
// not found by a renewal.
const (
	pushTTL   = 60 * time.Second
	pushBound = pushTTL / 3 / 2
)

// lostWithin waits for m's Lost, failing t after pushBound, and returns
// how long it took from since.
func lostWithin(t *testing.T, m *locker.Mutex, since time.Time, what string) time.Duration {
	t.Helper()
	select {
	case <-m.Lost():
		return time.Since(since)
	case <-time.After(pushBound - time.Since(since)):
		t.Fatalf("%s: Lost did not close within %v (the first renewal comes after %v)", what, pushBound, pushTTL/3)
		return 0
	}
}

// TestAHoldIsToldAtOnceWhenItsKeyGoes: on servers that publish keyspace
// events, whatever deletes a watched hold's key tells its holder through
// Redis, long before its first renewal could: the admin tools'
// ForceRelease (also when it hands the lock to a waiter at once), DEL and
// UNLINK by hand, an expiry, a RENAME. The holder's Unlock then reports
// ErrLost and the lock is the next owner's. (A hold younger than the
// Driver's watchAfter is not watched yet: TestForceReleaseIsPushedOnEveryTopology.)
func TestAHoldIsToldAtOnceWhenItsKeyGoes(t *testing.T) {
	t.Parallel()
	srv := standalone.Get(t)
	url := standaloneURL(t)
	admin := openClient(t, url)
	cases := []struct {
		name   string
		waiter bool // a waiter of another Client is queued: the lock goes to it
		drop   func(ctx context.Context, key, name string) error
	}{
		{name: "ForceRelease", drop: func(ctx context.Context, _, name string) error { return admin.ForceRelease(ctx, name) }},
		{name: "ForceRelease_to_a_waiter", waiter: true, drop: func(ctx context.Context, _, name string) error { return admin.ForceRelease(ctx, name) }},
		{name: "DEL", drop: func(ctx context.Context, key, _ string) error { return del(ctx, srv, key) }},
		{name: "UNLINK", drop: func(ctx context.Context, key, _ string) error { _, err := srv.Do(ctx, "UNLINK", key); return err }},
		{name: "PEXPIRE", drop: func(ctx context.Context, key, _ string) error { _, err := srv.Do(ctx, "PEXPIRE", key, "1"); return err }},
		{name: "RENAME", drop: func(ctx context.Context, key, _ string) error {
			_, err := srv.Do(ctx, "RENAME", key, key+":renamed")
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := drivertest.Context(t, time.Minute)
			name := "pushed/" + t.Name()
			c := openClient(t, url, locker.WithTTL(pushTTL))
			if !c.Capabilities().LostSignal {
				t.Fatal("a Driver on a server that publishes keyspace events does not declare LostSignal")
			}
			m := locked(t, ctx, c, name)
			key := c.Driver().(*redislock.Driver).Key(name)
			var got <-chan error
			if tc.waiter {
				wc := openClient(t, url)
				got = queued(t, ctx, wc.NewMutex(name), wc, 1)
			}
			drivertest.Eventually(t, 30*time.Second, "the key watched", func() bool { return watchers(ctx, srv, key) >= 1 })
			start := time.Now()
			if err := tc.drop(ctx, key, name); err != nil {
				t.Fatal(err)
			}
			t.Logf("Lost closed %v after the key went", lostWithin(t, m, start, tc.name).Round(time.Microsecond))
			if got != nil {
				if err := awaitLock(t, got, "the waiter handed the lock by ForceRelease"); err != nil {
					t.Fatal(err)
				}
			} else if ok, err := openClient(t, url).NewMutex(name).TryLock(ctx); !ok || err != nil {
				t.Errorf("TryLock by the next owner = %v, %v", ok, err)
			}
			if err := m.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
				t.Errorf("Unlock of the lost hold = %v, want ErrLost", err)
			}
		})
	}
}

// TestForceReleaseIsPushedOnEveryTopology: on a Cluster the keyspace event
// comes from the master of the key's slot, on Sentinel from the master the
// sentinels name. Released right after Lock, before its Driver subscribes
// (watchAfter), a hold is told by the check that follows the subscription.
func TestForceReleaseIsPushedOnEveryTopology(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"standalone", standaloneURL},
		{"cluster", clusterURL},
		{"sentinel", sentinelURL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := drivertest.Context(t, time.Minute)
			url := tc.url(t)
			c := openClient(t, url, locker.WithTTL(pushTTL))
			admin := openClient(t, url)
			// A few names, so that a Cluster's are on several masters.
			for i := range 3 {
				name := "pushed/" + t.Name() + "/" + string(rune('a'+i))
				m := locked(t, ctx, c, name)
				start := time.Now()
				if err := admin.ForceRelease(ctx, name); err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: Lost closed %v after ForceRelease", name, lostWithin(t, m, start, name).Round(time.Microsecond))
				if err := m.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
					t.Errorf("Unlock of the lost hold = %v, want ErrLost", err)
				}
			}
		})
	}
}

// TestAPassedHoldIsToldWhenItsKeyGoes: a hold passed within a Client
// (backend.Passer: Redis keeps the first owner of the chain) is the one
// told when the chain's key is deleted.
func TestAPassedHoldIsToldWhenItsKeyGoes(t *testing.T) {
	t.Parallel()
	ctx, name, c, other := passSetup(t, pushTTL)
	holder, held := handedOff(t, ctx, c, other, name)
	waiter, got := localWaiter(t, ctx, c, name, 1)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustLock(t, got, "the Client's waiter")
	if waiter.Token() != held+1 {
		t.Fatalf("the waiter's token %d after %d: not passed", waiter.Token(), held)
	}
	key := c.Driver().(*redislock.Driver).Key(name)
	drivertest.Eventually(t, 30*time.Second, "the key watched", func() bool { return watchers(ctx, standalone.Get(t), key) >= 1 })
	start := time.Now()
	dropHold(t, ctx, c, name)
	t.Logf("Lost of the passed hold closed %v after the key was deleted", lostWithin(t, waiter, start, "the passed hold").Round(time.Microsecond))
	if err := waiter.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
		t.Errorf("Unlock of the lost hold = %v, want ErrLost", err)
	}
}

// TestALossWhileThePubSubConnectionIsDownIsFound: an event published while
// the Driver's connection is down never comes; after go-redis subscribes
// again, the Driver asks Redis about its holds and tells the lost one,
// still well before its first renewal.
func TestALossWhileThePubSubConnectionIsDownIsFound(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, 2*time.Minute)
	srv := redisserver.RedisWith(t, redisserver.RedisOptions{Args: []string{"--notify-keyspace-events", keyspaceEvents}})
	url := "redis://" + srv.Addr
	fn := conformance.NewFaultNet()
	d, err := redislock.Open(ctx, url, redislock.WithDialer(fn.Dial))
	if err != nil {
		t.Fatal(err)
	}
	c, err := locker.New(d, locker.WithTTL(pushTTL))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	kept := locked(t, ctx, c, "kept")
	m := locked(t, ctx, c, "doomed")
	// Its key watched: a DEL now is pushed (and the hold put back).
	drivertest.Eventually(t, 30*time.Second, "the key watched", func() bool {
		return watchers(ctx, srv, d.(*redislock.Driver).Key("doomed")) == 1
	})
	fn.Cut()
	start := time.Now()
	if err := del(ctx, srv, d.(*redislock.Driver).Key("doomed")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Lost():
		t.Fatal("Lost closed while the Driver was cut off: nothing could have told it")
	default:
	}
	fn.Restore()
	t.Logf("Lost closed %v after the key was deleted while the connection was down", lostWithin(t, m, start, "after the reconnect").Round(time.Millisecond))
	select {
	case <-kept.Lost():
		t.Error("the hold whose key is still there was reported lost too")
	default:
	}
	if err := kept.Unlock(ctx); err != nil {
		t.Errorf("Unlock of the hold that was kept: %v", err)
	}
}

// TestHoldsOfOneNameNeverTakeAnOlderHoldsEvents: a name held in turn by
// two Clients, hundreds of times: each release's "del" can reach a Driver
// after it holds the name again, and must not be taken for the loss of its
// new hold.
func TestHoldsOfOneNameNeverTakeAnOlderHoldsEvents(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, 2*time.Minute)
	url := standaloneURL(t)
	name := "turns/" + t.Name()
	cs := []*locker.Client{openClient(t, url, locker.WithTTL(pushTTL)), openClient(t, url, locker.WithTTL(pushTTL))}
	// Each Client holds the name until its Driver watches the key, which
	// it then keeps watching through the short holds below.
	srv, key := standalone.Get(t), cs[0].Driver().(*redislock.Driver).Key(name)
	for i, c := range cs {
		m := locked(t, ctx, c, name)
		drivertest.Eventually(t, 30*time.Second, "the key watched", func() bool { return watchers(ctx, srv, key) == int64(i+1) })
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 400 {
		m := cs[i%2].NewMutex(name)
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("turn %d: Lock: %v", i, err)
		}
		// The other Client finds it held: a round trip during which an
		// event misread as this hold's loss would end it.
		if ok, err := cs[(i+1)%2].NewMutex(name).TryLock(ctx); ok || err != nil {
			t.Fatalf("turn %d: TryLock by the other Client = %v, %v", i, ok, err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("turn %d: Unlock = %v: the hold was reported lost", i, err)
		}
	}
}

// TestOpenWatchesWhenTheServersPublishKeyspaceEvents: Open asks the
// server; keyspace_events=true on a server that says it lacks them is an
// error, and false turns watching off. New watches only when told.
func TestOpenWatchesWhenTheServersPublishKeyspaceEvents(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, time.Minute)
	srv := redisserver.Redis(t) // its own: the test changes its setting
	url := "redis://" + srv.Addr
	watches := func(raw string) bool {
		t.Helper()
		d := openAny(t, raw)
		return d.Capabilities().LostSignal
	}
	if watches(url) {
		t.Error("Open on a server without keyspace events declares LostSignal")
	}
	if _, err := redislock.Open(ctx, url+"?keyspace_events=true"); !errors.Is(err, locker.ErrInvalidOption) || !strings.Contains(err.Error(), srv.Addr) {
		t.Errorf("Open with keyspace_events=true on a server without them = %v, want ErrInvalidOption naming %s", err, srv.Addr)
	}
	if _, err := srv.Do(ctx, "CONFIG", "SET", "notify-keyspace-events", "KA"); err != nil {
		t.Fatal(err)
	}
	if !watches(url) {
		t.Error("Open on a server with notify-keyspace-events KA does not declare LostSignal")
	}
	if watches(url + "?keyspace_events=false") {
		t.Error("keyspace_events=false declares LostSignal")
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	for _, tc := range []struct {
		opts []redislock.Option
		want bool
	}{
		{nil, false},
		{[]redislock.Option{redislock.WithKeyspaceEvents(true)}, true},
	} {
		d, err := redislock.New(rdb, tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Capabilities().LostSignal; got != tc.want {
			t.Errorf("New with %d options: LostSignal = %v, want %v", len(tc.opts), got, tc.want)
		}
		_ = d.Close()
	}
}

// TestDeletedKeyIsFoundByTheNextRenewal: without keyspace events, Redis
// does not push a deleted key's news, so the holder learns at its next
// renewal (within the TTL): Lost closes, and Unlock reports ErrLost without
// touching the next owner.
func TestDeletedKeyIsFoundByTheNextRenewal(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, time.Minute)
	url := standaloneURL(t) + "?keyspace_events=false"
	const ttl = 600 * time.Millisecond
	c := openClient(t, url, locker.WithTTL(ttl))
	if c.Capabilities().LostSignal {
		t.Fatal("keyspace_events=false declares LostSignal")
	}
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

// BenchmarkLostSignal measures how long a hold takes to learn that its
// key went, on each topology, from the return of the call that deleted it
// (DEL by hand, or ForceRelease) to Lost's closing: p50 and p99 in µs.
// "watched": the key's subscription is in place (the event tells); "young":
// a name the Driver never held, deleted right after Lock, before the
// Driver subscribes (watchAfter), so the check after the subscription
// tells.
func BenchmarkLostSignal(b *testing.B) {
	for _, top := range []struct {
		name string
		url  func(testing.TB) string
		srv  func(testing.TB, context.Context, string) *redisserver.RedisServer
	}{
		{"standalone", standaloneURLOf, func(t testing.TB, _ context.Context, _ string) *redisserver.RedisServer { return standalone.Get(t) }},
		{"cluster", func(t testing.TB) string { return "redis+cluster://" + strings.Join(cluster.Get(t).Addrs(), ",") },
			func(t testing.TB, ctx context.Context, key string) *redisserver.RedisServer {
				s, err := cluster.Get(t).KeyOwner(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}},
		{"sentinel", func(t testing.TB) string { return sentinelURLOf(sentinel.Get(t)) },
			func(t testing.TB, ctx context.Context, _ string) *redisserver.RedisServer {
				s, err := sentinel.Get(t).Master(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}},
	} {
		for _, how := range []string{"DEL", "ForceRelease"} {
			for _, watched := range []bool{true, false} {
				age := "young"
				if watched {
					age = "watched"
				}
				b.Run(top.name+"/"+how+"/"+age, func(b *testing.B) {
					ctx := drivertest.Context(b, 10*time.Minute)
					url := top.url(b)
					c, err := locker.Open(ctx, url, locker.WithTTL(pushTTL))
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					admin, err := locker.Open(ctx, url)
					if err != nil {
						b.Fatal(err)
					}
					defer admin.Close()
					var took []time.Duration
					for i := 0; b.Loop(); i++ {
						// Watched: a few names, subscribed once and kept;
						// young: a new name each time, never subscribed.
						name := "lostbench/" + b.Name() + "/" + strconv.Itoa(i%16)
						if !watched {
							name = "lostbench/" + b.Name() + "/" + strconv.Itoa(i)
						}
						m := c.NewMutex(name)
						if err := m.Lock(ctx); err != nil {
							b.Fatal(err)
						}
						key := c.Driver().(*redislock.Driver).Key(name)
						srv := top.srv(b, ctx, key)
						if watched {
							for watchers(ctx, srv, key) < 1 {
								time.Sleep(time.Millisecond)
							}
						}
						if how == "DEL" {
							err = del(ctx, srv, key)
						} else {
							err = admin.ForceRelease(ctx, name)
						}
						if err != nil {
							b.Fatal(err)
						}
						sent := time.Now()
						select {
						case <-m.Lost():
						case <-time.After(pushBound):
							b.Fatalf("Lost did not close within %v", pushBound)
						}
						took = append(took, time.Since(sent))
						_ = m.Unlock(ctx)
					}
					slices.Sort(took)
					b.ReportMetric(0, "ns/op")
					b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-us")
					b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-us")
				})
			}
		}
	}
}
