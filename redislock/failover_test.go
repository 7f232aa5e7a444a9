package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/redislock"
)

// prober tries to take a lock from another client over and over, and
// records a grant that came while the first owner still believed it held
// the lock: two owners at once.
type prober struct {
	m        *locker.Mutex
	first    *locker.Mutex
	unlocked atomic.Bool // the first owner unlocked: it no longer believes it holds

	grants     atomic.Int32
	violations atomic.Int32
	token      atomic.Uint64
	errs       atomic.Int32
}

// probe starts a prober of m against the hold of first, which believes it
// holds until its Lost fires or the test sets p.unlocked. stop ends the
// prober and waits for it; it may be called more than once.
func probe(ctx context.Context, m, first *locker.Mutex) (p *prober, stop func()) {
	p = &prober{m: m, first: first}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { p.run(ctx, done) })
	var once sync.Once
	return p, func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

// believes reports whether the first owner holds, as far as it knows.
func (p *prober) believes() bool {
	select {
	case <-p.first.Lost():
		return false
	default:
		return !p.unlocked.Load()
	}
}

func (p *prober) run(ctx context.Context, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		ok, err := p.m.TryLock(tctx)
		cancel()
		if err != nil {
			p.errs.Add(1) // the master is down or failing over
			continue
		}
		if !ok {
			continue
		}
		if p.believes() {
			p.violations.Add(1)
		}
		p.grants.Add(1)
		p.token.Store(p.m.Token())
		_ = p.m.Unlock(ctx)
	}
}

// TestSentinelFailover kills the master while a lock is held with
// wait_replicas=1 and its lease renewed, and checks that the failover is
// reported, never silent: no other owner gets the lock while the first
// still believes it holds it, and afterwards either the hold continues on
// the new master (renewals and Unlock work there) or its owner was told
// it was lost. Fencing tokens keep growing across the failover.
//
// Writes are paused on the master (CLIENT PAUSE WRITE) and the replica
// caught up before the kill, so no acknowledged write is lost: the
// assertion is then strict. Without the pause, a renewal acknowledged in
// the last millisecond before a crash may be lost with it — the failover
// caveat of the package doc.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, 2*time.Minute)
	s := redisserver.RedisSentinel(t) // its own: the test kills its master
	url := sentinelURLOf(s)
	const ttl = 3 * time.Second
	a := openClient(t, url+"?wait_replicas=1&wait_timeout=2s", locker.WithTTL(ttl))
	b := openClient(t, url, locker.WithTTL(ttl))
	name := "failover"
	ma := locked(t, ctx, a, name)
	tokA := ma.Token()
	p, stop := probe(ctx, b.NewMutex(name), ma)
	defer stop()

	failOver(t, ctx, s)

	// Keep probing for a lease after the failover.
	end := time.Now().Add(ttl)
	for time.Now().Before(end) && p.believes() {
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-ma.Lost():
		t.Logf("the owner was told its hold was lost during the failover; the prober got the lock %d times after that", p.grants.Load())
		if err := ma.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
			t.Errorf("Unlock of the lost hold = %v, want ErrLost", err)
		}
	default:
		t.Logf("the hold survived the failover (renewed on the new master)")
		p.unlocked.Store(true)
		if err := ma.Unlock(ctx); err != nil {
			t.Errorf("Unlock on the new master: %v", err)
		}
	}
	drivertest.Eventually(t, 30*time.Second, "the prober gets the lock after the owner is done", func() bool { return p.grants.Load() > 0 })
	stop()
	if v := p.violations.Load(); v != 0 {
		t.Errorf("two owners at once: the prober got the lock %d times while the first owner believed it held it", v)
	}
	if tok := p.token.Load(); tok <= tokA {
		t.Errorf("token after the failover %d, not above %d before it", tok, tokA)
	}
	t.Logf("prober: %d errors while the master was down", p.errs.Load())
}

// TestSentinelALossAfterAFailoverIsPushed: after a failover, the Driver's
// pub/sub connection follows the master (go-redis asks the sentinels when
// it reconnects, and the Driver checks its holds once subscribed again), so
// a deletion on the new master reaches the holder long before its first
// renewal.
func TestSentinelALossAfterAFailoverIsPushed(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, 2*time.Minute)
	s := redisserver.RedisSentinel(t) // its own: the test kills its master
	publishKeyspaceEvents(t, s.Servers...)
	c := openClient(t, sentinelURLOf(s), locker.WithTTL(pushTTL))
	if !c.Capabilities().LostSignal {
		t.Fatal("a Driver on servers with keyspace events does not declare LostSignal")
	}
	name := "failover/" + t.Name()
	m := locked(t, ctx, c, name)
	newMaster := failOver(t, ctx, s)
	select {
	case <-m.Lost():
		t.Fatal("the hold was reported lost in the failover (the replica had caught up)")
	default:
	}
	start := time.Now()
	if err := del(ctx, newMaster, c.Driver().(*redislock.Driver).Key(name)); err != nil {
		t.Fatal(err)
	}
	t.Logf("Lost closed %v after the key was deleted on the new master", lostWithin(t, m, start, "after the failover").Round(time.Millisecond))
}

// failOver stops writes on s's master, waits until its replicas have its
// whole stream, kills it and waits for the sentinels to promote a replica,
// which it returns: nothing acknowledged before the kill is lost.
func failOver(t *testing.T, ctx context.Context, s *redisserver.RedisSentinelServer) *redisserver.RedisServer {
	t.Helper()
	old, err := s.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE"); err != nil {
		t.Fatal(err)
	}
	waitReplicaCaughtUp(t, ctx, old, s.Servers)
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	newMaster, err := s.WaitFailover(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failover to %s took %v", newMaster.Addr, time.Since(killed).Round(time.Millisecond))
	return newMaster
}

// waitReplicaCaughtUp waits until every replica of master has its whole
// replication stream.
func waitReplicaCaughtUp(t *testing.T, ctx context.Context, master *redisserver.RedisServer, servers []*redisserver.RedisServer) {
	t.Helper()
	offset := func(srv *redisserver.RedisServer, field string) int64 {
		r, err := srv.Do(ctx, "INFO", "replication")
		if err != nil {
			t.Fatalf("INFO replication: %v", err)
		}
		for _, line := range strings.Split(r.(string), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatalf("%s: no %s in INFO replication", srv.Addr, field)
		return 0
	}
	want := offset(master, "master_repl_offset")
	for _, srv := range servers {
		if srv.Addr == master.Addr {
			continue
		}
		drivertest.Eventually(t, 30*time.Second, fmt.Sprintf("replica %s at offset %d", srv.Addr, want), func() bool {
			return offset(srv, "slave_repl_offset") >= want
		})
	}
}

// TestWaiterSurvivesARestart: a Redis restart (without persistence, so
// every lock is forgotten) does not fail a waiting Lock: it retries
// through the outage, its pub/sub connection comes back, and it gets the
// lock. The holder learns at its next renewal that its hold is gone.
func TestWaiterSurvivesARestart(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, 2*time.Minute)
	srv := redisserver.Redis(t) // its own: the test restarts it
	url := "redis://" + srv.Addr
	const ttl = 2 * time.Second
	ma := locked(t, ctx, openClient(t, url, locker.WithTTL(ttl)), "restart")
	bc := openClient(t, url, locker.WithTTL(ttl))
	mb := bc.NewMutex("restart")
	got := make(chan error, 1)
	go func() { got <- mb.Lock(ctx) }()
	drivertest.Eventually(t, 30*time.Second, "the waiter queued", func() bool {
		n, err := bc.Driver().(backend.QueueInspector).Waiters(ctx, "restart")
		return err == nil && n == 1
	})
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	drivertest.Succeeds(t, got, 30*time.Second, "the waiter's Lock across the restart")
	select {
	case <-ma.Lost():
	case <-time.After(ttl + 10*time.Second):
		t.Fatal("the holder was not told that the restart lost its hold")
	}
	if err := ma.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
		t.Errorf("the old holder's Unlock = %v, want ErrLost", err)
	}
	if err := mb.Unlock(ctx); err != nil {
		t.Errorf("the new holder's Unlock: %v", err)
	}
}
