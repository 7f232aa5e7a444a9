package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/etcdlock"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver/etcdserver"
)

// Driver-level tests of what the conformance suite does not reach: the
// traps of etcd's stock concurrency.Mutex, waits while the cluster is
// unreachable, the herd effect, authentication.

// TestOneKeyPerSessionAndName checks the key of a hold: one per session
// and name, reused by successive holds, owner-checked by its create
// revision, never shared by two acquisitions of the Driver (etcd's
// concurrency.Mutex keys a holder by its session only, so a second Mutex
// on the same session believes it holds too).
func TestOneKeyPerSessionAndName(t *testing.T) {
	srv := single.Get(t)
	ctx := drivertest.Context(t, time.Minute)
	url := urlOf(srv, "/one-key", "")
	d, other := openDriver(t, url), openDriver(t, url)
	admin := adminClient(t, srv)
	const name = "one-key"
	pfx := etcdlock.NamePrefix(d, name)
	keys := func() []string {
		t.Helper()
		resp, err := admin.Get(ctx, pfx, clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, kv := range resp.Kvs {
			ks = append(ks, string(kv.Key))
		}
		return ks
	}

	a := drivertest.Acquire(t, ctx, d, name, "owner-a", false)
	if _, err := d.Acquire(ctx, backend.Request{Name: name, Owner: "owner-b", TTL: time.Minute}); !errors.Is(err, backend.ErrHeld) {
		t.Errorf("a second owner through the same Driver: Acquire = %v, want ErrHeld", err)
	}
	// A second acquisition through the Driver, which package locker never
	// makes, waits for the session's key of the name to go.
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if l, err := d.AcquireWait(wctx, backend.Request{Name: name, Owner: "owner-c", TTL: time.Minute}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second owner waiting through the same Driver: AcquireWait = %v, %v; want to wait", l, err)
	}
	cancel()
	var he *backend.HeldError
	if _, err := other.Acquire(ctx, backend.Request{Name: name, Owner: "owner-d", TTL: time.Minute}); !errors.As(err, &he) || he.Owner != "owner-a" || he.Token != a.Token() {
		t.Errorf("Acquire through another Driver = %v, want a HeldError naming owner-a and token %d", err, a.Token())
	}
	ks := keys()
	if len(ks) != 1 {
		t.Fatalf("keys of the name = %q, want the holder's only", ks)
	}
	first := ks[0]

	// Successive holds reuse the key: etcd keeps a deleted key in its
	// index until a compaction, so a key per acquisition made every range
	// over a busy name slower.
	last := a.Token()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var l backend.Lease
	for i := range 20 {
		l = drivertest.Acquire(t, ctx, d, name, fmt.Sprint("o", i), i%2 == 0)
		if ks := keys(); len(ks) != 1 || ks[0] != first {
			t.Fatalf("hold %d: keys %q, want %q", i, ks, first)
		}
		if l.Token() <= last {
			t.Errorf("hold %d: token %d after %d", i, l.Token(), last)
		}
		last = l.Token()
		if i < 19 {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The first hold's Release and Renew, now stale, leave the last
	// hold's key alone: the owner check is on the create revision.
	if err := a.Release(ctx); !errors.Is(err, backend.ErrLost) {
		t.Errorf("a stale Release = %v, want ErrLost", err)
	}
	if err := a.Renew(ctx, time.Minute); !errors.Is(err, backend.ErrLost) {
		t.Errorf("a stale Renew = %v, want ErrLost", err)
	}
	if err := l.Renew(ctx, time.Minute); err != nil {
		t.Errorf("the holder's Renew = %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l.Lost().Fired() || a.Lost().Fired() {
		t.Error("Lost fired after a normal Release")
	}
	if ks := keys(); len(ks) != 0 {
		t.Errorf("keys after the last Release: %q", ks)
	}
}

// TestGivingUpWhileTheClusterIsDown: a waiter that gives up while etcd
// does not answer returns at once, and its key goes once the cluster is
// back — deleted in the background, or with the session.
func TestGivingUpWhileTheClusterIsDown(t *testing.T) {
	srv := single.Get(t)
	if len(srv.Members) == 0 {
		t.Skip("needs an etcd started by testserver, to stop it")
	}
	drivertest.GiveUpWhileTheServerIsDown(t, queue(srv, "/down", "session_ttl=5s"), srv.Members[0])
}

// TestOneReleaseWakesOneWaiter: each waiter waits for the key just before
// its own only, so a release wakes one waiter however many wait.
func TestOneReleaseWakesOneWaiter(t *testing.T) {
	n := 100
	if testing.Short() {
		n = 20
	}
	drivertest.OneReleaseWakesOneWaiter(t, queue(single.Get(t), "/herd", ""), n)
}

// queue returns the queue checks' hooks for Drivers of srv under prefix.
func queue(srv *etcdserver.EtcdServer, prefix, query string) drivertest.Queue[*etcdlock.Driver] {
	url := urlOf(srv, prefix, query)
	return drivertest.Queue[*etcdlock.Driver]{
		Open:    func(t *testing.T) *etcdlock.Driver { return openDriver(t, url) },
		Waiting: etcdlock.Waiting,
		Wakeups: etcdlock.Wakeups,
	}
}

// TestAuthentication opens a Driver with a user and password on a cluster
// of its own with authentication on, and checks that a wrong password is an
// error that does not show it.
func TestAuthentication(t *testing.T) {
	srv := etcdserver.Etcd(t)
	ctx := drivertest.Context(t, time.Minute)
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
	l := drivertest.Acquire(t, ctx, d, "guarded", "owner", false)
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
