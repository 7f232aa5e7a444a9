package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/etcdlock"
	"github.com/golocker/locker/internal/testserver"
)

// Driver-level tests of what the conformance suite does not reach: the
// traps of etcd's stock concurrency.Mutex, waits while the cluster is
// unreachable, and the herd effect.

func TestOneSessionTwoOwners(t *testing.T) {
	srv := single.Get(t)
	ctx := testCtx(t, time.Minute)
	d := openDriver(t, urlOf(srv, "/two-owners", ""))
	admin := adminClient(t, srv)
	const name = "one-session"

	// concurrency.Mutex keys a holder by its session's lease only, so a
	// second Mutex on the same session believes it holds too.
	a := acquire(t, ctx, d, name, "owner-a", false)
	if _, err := d.Acquire(ctx, backend.Request{Name: name, Owner: "owner-b", TTL: time.Minute}); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("a second owner on the same session: Acquire = %v, want ErrHeld", err)
	}
	// TryLock left no key behind.
	if n, err := d.Waiters(ctx, name); err != nil || n != 0 {
		t.Errorf("Waiters after a refused TryLock = %d, %v; want 0", n, err)
	}

	// A waiter on the same session waits for the holder, not past it.
	got := make(chan backend.Lease, 1)
	go func() {
		l, err := d.Acquire(ctx, backend.Request{Name: name, Owner: "owner-c", TTL: time.Minute, Wait: true})
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- l
	}()
	eventually(t, 10*time.Second, "the waiter watches", func() bool { return etcdlock.Watching(d) == 1 })
	select {
	case <-got:
		t.Fatal("a waiter on the holder's own session got the lock while it was held")
	default:
	}
	tokenA := a.Token()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var c backend.Lease
	select {
	case c = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock after the release")
	}
	if c.Token() <= tokenA {
		t.Errorf("token %d after %d", c.Token(), tokenA)
	}

	// Release is owner-checked on the create revision: a's second
	// Release, and a's Renew, leave c's key alone.
	if err := a.Release(ctx); !errors.Is(err, backend.ErrLost) {
		t.Errorf("a stale Release = %v, want ErrLost", err)
	}
	if err := a.Renew(ctx, time.Minute); !errors.Is(err, backend.ErrLost) {
		t.Errorf("a stale Renew = %v, want ErrLost", err)
	}
	if err := c.Renew(ctx, time.Minute); err != nil {
		t.Errorf("the holder's Renew = %v", err)
	}
	resp, err := admin.Get(ctx, etcdlock.NamePrefix(d, name), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 1 {
		t.Errorf("keys of the name = %v, %v; want the holder's only", resp, err)
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Lost():
		t.Error("Lost closed after a normal Release")
	default:
	}
}

func TestNamesAreDistinctRanges(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	d := openDriver(t, urlOf(single.Get(t), "/ranges", ""))
	// "a" must not see the keys of "a/b" as its own holders or waiters.
	ab := acquire(t, ctx, d, "a/b", "o1", false)
	defer ab.Release(ctx)
	a := acquire(t, ctx, d, "a", "o2", false)
	defer a.Release(ctx)
	hs, err := d.Holds(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 || hs[0].Name != "a" || hs[1].Name != "a/b" || hs[0].Token != a.Token() || hs[0].Owner != "o2" {
		t.Errorf("Holds(a) = %+v", hs)
	}
	if hs, err := d.Holds(ctx, "a/"); err != nil || len(hs) != 1 || hs[0].Name != "a/b" {
		t.Errorf("Holds(a/) = %+v, %v", hs, err)
	}
	if err := d.ForceRelease(ctx, "nobody"); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("ForceRelease of a free name = %v, want ErrNotHeld", err)
	}
}

// TestGivingUpWhileTheClusterIsDown cancels a waiter while etcd does not
// answer (its process is stopped): Acquire must return within its cleanup
// bound rather than hang on the deletion of its key, and the key must be
// gone once the cluster is back — deleted by the session's keepalive loop,
// or with the session.
func TestGivingUpWhileTheClusterIsDown(t *testing.T) {
	srv := single.Get(t)
	if len(srv.Members) == 0 {
		t.Skip("needs an etcd started by testserver, to stop it")
	}
	ctx := testCtx(t, 2*time.Minute)
	url := urlOf(srv, "/down", "session_ttl=5s")
	holder, waiter := openDriver(t, url), openDriver(t, url)
	const name = "down"
	l := acquire(t, ctx, holder, name, "holder", false)
	defer l.Release(ctx)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(wctx, backend.Request{Name: name, Owner: "waiter", TTL: time.Minute, Wait: true})
		errc <- err
	}()
	eventually(t, 10*time.Second, "the waiter watches", func() bool { return etcdlock.Watching(waiter) == 1 })

	m := srv.Members[0]
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := m.Resume(); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	cancel()
	start := time.Now()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire = %v, want context.Canceled", err)
		}
		t.Logf("the waiter gave up %v after its ctx ended, with the cluster down", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire did not return within 10s of its ctx ending while the cluster was down")
	}
	resume()
	eventually(t, 30*time.Second, "no waiter left", func() bool {
		n, err := holder.Waiters(ctx, name)
		return err == nil && n == 0
	})
}

// TestOneReleaseWakesOneWaiter queues many waiters on one name, releases
// the lock twice, and counts the watch events the waiters received: one
// per release, however many wait — each waiter watches only the key just
// before its own. All waiters share one Driver, hence one watch stream,
// whose events come in revision order: once the second grant is seen,
// every event of the first release has been delivered too.
func TestOneReleaseWakesOneWaiter(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 100
	}
	ctx := testCtx(t, 3*time.Minute)
	url := urlOf(single.Get(t), "/herd", "")
	d, h := openDriver(t, url), openDriver(t, url)
	const name = "herd"
	hl := acquire(t, ctx, h, name, "holder", false)

	wctx, cancel := context.WithCancel(ctx)
	grants := make(chan backend.Lease, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := d.Acquire(wctx, backend.Request{Name: name, Owner: fmt.Sprint("waiter-", i), TTL: time.Minute, Wait: true})
			switch {
			case err == nil:
				grants <- l
			case !errors.Is(err, context.Canceled):
				t.Errorf("waiter %d: %v", i, err)
			}
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
		close(grants)
		for l := range grants {
			_ = l.Release(ctx)
		}
	}()
	eventually(t, 2*time.Minute, fmt.Sprintf("%d waiters watching", n), func() bool { return etcdlock.Watching(d) == int64(n) })
	t.Logf("%d waiters queued in %v", n, time.Since(start).Round(time.Millisecond))
	if k, err := d.Waiters(ctx, name); err != nil || k != n {
		t.Fatalf("Waiters = %d, %v; want %d", k, err, n)
	}
	before := etcdlock.PredecessorEvents(d)

	next := func(what string) backend.Lease {
		t.Helper()
		select {
		case l := <-grants:
			return l
		case <-time.After(30 * time.Second):
			t.Fatalf("no grant after %s", what)
			return nil
		}
	}
	if err := hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	first := next("the holder's release")
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := next("the first waiter's release")
	defer second.Release(ctx)
	events := etcdlock.PredecessorEvents(d) - before
	t.Logf("%d waiters, 2 releases: %d watch notifications", n, events)
	if events != 2 {
		t.Errorf("2 releases woke waiters %d times, want 2 (one each)", events)
	}
	if k, err := d.Waiters(ctx, name); err != nil || k != n-2 {
		t.Errorf("Waiters = %d, %v; want %d", k, err, n-2)
	}
}

// TestStaleRenewAndReleaseAfterADrop is the suite's
// spi/stale_renew_and_release_are_refused as it would run for a driver
// whose holds live as long as a session: the hold is made stale by deleting
// its key. (The suite waits for Request.TTL to run out instead, which
// such a driver may ignore, so its version of the check waits in vain.)
func TestStaleRenewAndReleaseAfterADrop(t *testing.T) {
	srv := single.Get(t)
	ctx := testCtx(t, time.Minute)
	url := urlOf(srv, "/stale", "")
	da, db := openDriver(t, url), openDriver(t, url)
	const name = "stale"
	la := acquire(t, ctx, da, name, "a", false)
	if err := deleteLowest(ctx, adminClient(t, srv), etcdlock.NamePrefix(da, name)); err != nil {
		t.Fatal(err)
	}
	lb := acquire(t, ctx, db, name, "b", true)
	defer lb.Release(ctx)
	select {
	case <-la.Lost():
	case <-time.After(10 * time.Second):
		t.Error("the dropped hold's Lost did not close")
	}
	if err := la.Renew(ctx, time.Second); !errors.Is(err, backend.ErrLost) {
		t.Errorf("the stale owner's Renew = %v, want ErrLost", err)
	}
	if err := la.Release(ctx); !errors.Is(err, backend.ErrLost) {
		t.Errorf("the stale owner's Release = %v, want ErrLost", err)
	}
	if _, err := da.Acquire(ctx, backend.Request{Name: name, Owner: "c", TTL: time.Second}); !errors.Is(err, backend.ErrHeld) {
		t.Errorf("the stale Renew or Release freed the next owner's lock: Acquire = %v", err)
	}
	if err := lb.Renew(ctx, time.Minute); err != nil {
		t.Errorf("the owner's Renew after the stale calls: %v", err)
	}
}

// TestAuthentication opens a Driver with a user and password on a cluster
// of its own with authentication on, and checks that a wrong password is an
// error that does not show it.
func TestAuthentication(t *testing.T) {
	srv := testserver.Etcd(t)
	ctx := testCtx(t, time.Minute)
	admin := adminClient(t, srv)
	_, _ = admin.RoleAdd(ctx, "root")
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "r00t-Pw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	d := openDriver(t, strings.Replace(urlOf(srv, "/auth", ""), "etcd://", "etcd://root:r00t-Pw@", 1))
	l := acquire(t, ctx, d, "guarded", "owner", false)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(urlOf(srv, "/auth", ""), "etcd://", "etcd://root:Wr0ng-Pw@", 1)
	if _, err := etcdlock.Open(ctx, bad); err == nil || strings.Contains(err.Error(), "Wr0ng-Pw") {
		t.Errorf("Open with a wrong password = %v, want an error without the password", err)
	} else {
		t.Logf("a wrong password: %v", err)
	}
	if _, err := locker.Open(ctx, bad); err == nil || strings.Contains(err.Error(), "Wr0ng-Pw") {
		t.Errorf("locker.Open with a wrong password = %v, want an error without the password", err)
	}
}

// TestKeysAreReusedAcrossAcquisitions checks that a Driver's successive
// holds of a name use the same key, and concurrent ones distinct keys:
// etcd keeps every deleted key in its index until a compaction, so a key
// per acquisition made ranges over a busy name slower and slower.
func TestKeysAreReusedAcrossAcquisitions(t *testing.T) {
	srv := single.Get(t)
	ctx := testCtx(t, time.Minute)
	d := openDriver(t, urlOf(srv, "/reuse", ""))
	admin := adminClient(t, srv)
	const name = "reuse"
	pfx := etcdlock.NamePrefix(d, name)
	holder := func() string {
		t.Helper()
		resp, err := admin.Get(ctx, pfx, clientv3.WithFirstCreate()...)
		if err != nil || len(resp.Kvs) == 0 {
			t.Fatalf("the holder's key: %v, %v", resp, err)
		}
		return string(resp.Kvs[0].Key)
	}
	keys := map[string]bool{}
	var last uint64
	for i := range 30 {
		l := acquire(t, ctx, d, name, fmt.Sprintf("o%d", i), true)
		keys[holder()] = true
		if l.Token() <= last {
			t.Errorf("acquisition %d: token %d after %d", i, l.Token(), last)
		}
		last = l.Token()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(keys) != 1 {
		t.Errorf("30 successive holds used %d keys, want 1: %v", len(keys), keys)
	}
	// Two at once: a holder and a waiter have keys of their own.
	a := acquire(t, ctx, d, name, "a", true)
	got := make(chan backend.Lease, 1)
	go func() {
		l, err := d.Acquire(ctx, backend.Request{Name: name, Owner: "b", TTL: time.Minute, Wait: true})
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	eventually(t, 10*time.Second, "the waiter's key", func() bool {
		resp, err := admin.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 2
	})
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-got
	if b == nil {
		t.FailNow()
	}
	if b.Token() <= a.Token() {
		t.Errorf("the waiter's token %d is not above the holder's %d", b.Token(), a.Token())
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
