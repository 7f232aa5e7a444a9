package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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
	ctx, url, d, admin := keysSetup(t, "/one-key")
	other := openDriver(t, url)
	const name = "one-key"
	keys := func() []string {
		t.Helper()
		return keysOf(t, ctx, admin, d, name)
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

// keysSetup starts a test of the keys a Driver writes: a ctx, the URL of
// Drivers under prefix on the shared member, one of them, and the client
// that reads their keys.
func keysSetup(t *testing.T, prefix string) (context.Context, string, *etcdlock.Driver, *clientv3.Client) {
	srv := single.Get(t)
	url := urlOf(srv, prefix, "")
	return drivertest.Context(t, time.Minute), url, openDriver(t, url), adminClient(t, srv)
}

// keysOf returns the keys of a lock name, read with admin.
func keysOf(t *testing.T, ctx context.Context, admin *clientv3.Client, d *etcdlock.Driver, name string) []string {
	t.Helper()
	resp, err := admin.Get(ctx, etcdlock.NamePrefix(d, name), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, kv := range resp.Kvs {
		ks = append(ks, string(kv.Key))
	}
	return ks
}

// acquireAsync starts d.AcquireWait of name for owner; the channel gets
// its lease, nil if it failed (and the test with it).
func acquireAsync(t *testing.T, ctx context.Context, d *etcdlock.Driver, name, owner string) <-chan backend.Lease {
	ch := make(chan backend.Lease, 1)
	go func() {
		l, err := d.AcquireWait(ctx, backend.Request{Name: name, Owner: owner, TTL: time.Minute})
		if err != nil {
			t.Error(err)
		}
		ch <- l
	}()
	return ch
}

// TestAReleaseAfterAForceReleaseLeavesTheNextHold: a Release deletes its
// key with a plain Delete only while nothing else of the session can have
// made it; a hold force-released, whose key the same Driver made again for
// a new hold, must not delete that hold's key.
func TestAReleaseAfterAForceReleaseLeavesTheNextHold(t *testing.T) {
	ctx, url, d, admin := keysSetup(t, "/force-then-reuse")
	const name = "reused"
	a := drivertest.Acquire(t, ctx, d, name, "owner-a", true)
	if err := openDriver(t, url).ForceRelease(ctx, name); err != nil {
		t.Fatal(err)
	}
	b := drivertest.Acquire(t, ctx, d, name, "owner-b", true)
	if err := a.Release(ctx); !errors.Is(err, backend.ErrLost) {
		t.Errorf("the force-released hold's Release = %v, want ErrLost", err)
	}
	if ks := keysOf(t, ctx, admin, d, name); len(ks) != 1 {
		t.Errorf("keys after the stale Release: %q, want the new hold's", ks)
	}
	if err := b.Renew(ctx, time.Minute); err != nil {
		t.Errorf("the new hold's Renew = %v", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if b.Lost().Fired() {
		t.Error("the new hold was reported lost")
	}

	// Again, with the new acquisition queued behind another Driver's hold
	// when the stale Release comes.
	other := openDriver(t, url)
	a = drivertest.Acquire(t, ctx, d, name, "owner-a2", true)
	if err := other.ForceRelease(ctx, name); err != nil {
		t.Fatal(err)
	}
	o := drivertest.Acquire(t, ctx, other, name, "owner-o", true)
	queued := acquireAsync(t, ctx, d, name, "owner-c")
	drivertest.Eventually(t, 10*time.Second, "the new acquisition queued", func() bool { return etcdlock.Waiting(d) == 1 })
	if err := a.Release(ctx); !errors.Is(err, backend.ErrLost) {
		t.Errorf("the force-released hold's Release, a new acquisition queued = %v, want ErrLost", err)
	}
	if ks := keysOf(t, ctx, admin, d, name); len(ks) != 2 {
		t.Errorf("keys after the stale Release: %q, want the holder's and the queued one's", ks)
	}
	if err := o.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c := drivertest.Receive(t, queued, 10*time.Second, "the queued acquisition")
	if c == nil {
		return
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Lost().Fired() {
		t.Error("the queued hold was reported lost")
	}
}

// TestAFailedReleaseMovesTheNameToANewKey: a plain Delete that failed may
// still be applied later, so the session's next hold of the name uses a
// key that the Delete cannot reach; the old key goes in the background.
func TestAFailedReleaseMovesTheNameToANewKey(t *testing.T) {
	ctx, _, d, admin := keysSetup(t, "/failed-release")
	const name = "moved"
	a := drivertest.Acquire(t, ctx, d, name, "owner-a", true)
	first := keysOf(t, ctx, admin, d, name)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.Release(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Release with a cancelled context = %v, want context.Canceled", err)
	}
	drivertest.Eventually(t, 10*time.Second, "the key of the failed Release deleted in the background", func() bool {
		return len(keysOf(t, ctx, admin, d, name)) == 0
	})
	b := drivertest.Acquire(t, ctx, d, name, "owner-b", true)
	ks := keysOf(t, ctx, admin, d, name)
	if len(ks) != 1 || len(first) != 1 || ks[0] == first[0] {
		t.Errorf("key after a failed Release: %q, before: %q; want one other key", ks, first)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c := drivertest.Acquire(t, ctx, d, name, "owner-c", false)
	if again := keysOf(t, ctx, admin, d, name); len(again) != 1 || again[0] != ks[0] {
		t.Errorf("key of the next hold: %q, want %q reused", again, ks)
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAPlainDeleteInFlightHoldsBackTheKey: while a Release's plain Delete
// is in flight, the Driver makes its key for no one: a force-release that
// lands meanwhile would otherwise let a new acquisition make the key that
// the Delete then removes.
func TestAPlainDeleteInFlightHoldsBackTheKey(t *testing.T) {
	ctx, url, d, admin := keysSetup(t, "/delete-in-flight")
	const name = "held-back"
	inDelete, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	etcdlock.BeforePlainDelete(d, func() {
		once.Do(func() {
			close(inDelete)
			<-resume
		})
	})
	a := drivertest.Acquire(t, ctx, d, name, "owner-a", true)
	released := make(chan error, 1)
	go func() { released <- a.Release(ctx) }()
	drivertest.Receive(t, inDelete, 10*time.Second, "the Release's plain Delete")
	if err := openDriver(t, url).ForceRelease(ctx, name); err != nil {
		t.Fatal(err)
	}
	acquired := acquireAsync(t, ctx, d, name, "owner-b")
	drivertest.Eventually(t, 10*time.Second, "the new acquisition held back, or its key made", func() bool {
		return etcdlock.HeldBack(d) == 1 || len(keysOf(t, ctx, admin, d, name)) > 0
	})
	if ks := keysOf(t, ctx, admin, d, name); len(ks) != 0 {
		t.Errorf("keys while the Delete is in flight: %q, want none", ks)
	}
	close(resume)
	if err := drivertest.Receive(t, released, 10*time.Second, "the Release"); !errors.Is(err, backend.ErrLost) {
		t.Errorf("the force-released hold's Release = %v, want ErrLost", err)
	}
	b := drivertest.Receive(t, acquired, 10*time.Second, "the held-back acquisition")
	if b == nil {
		return
	}
	if ks := keysOf(t, ctx, admin, d, name); len(ks) != 1 {
		t.Errorf("keys once the Delete answered: %q, want the new hold's", ks)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if b.Lost().Fired() {
		t.Error("the new hold was reported lost")
	}
}

// lateCancel is a context that is not ended when first asked (the
// acquisition starts) and ended from then on, so that the acquisition's
// Put fails in flight, its outcome unknown.
type lateCancel struct {
	context.Context
	asked atomic.Bool
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *lateCancel) Err() error {
	if c.asked.Swap(true) {
		return context.Canceled
	}
	return nil
}

func (c *lateCancel) Done() <-chan struct{} {
	if c.asked.Load() {
		return closedChan
	}
	return nil
}

// TestAPutFailedInFlightMovesTheNameToANewKey: the Put of an acquisition
// that failed in flight may still be applied until its abort key is
// written; if it made the key again behind a later hold that was then
// force-released, that hold's Release must not delete it and succeed.
func TestAPutFailedInFlightMovesTheNameToANewKey(t *testing.T) {
	ctx, url, d, admin := keysSetup(t, "/put-in-flight")
	other := openDriver(t, url)
	const name = "late-put"
	warm := drivertest.Acquire(t, ctx, d, "warm", "owner-warm", false) // the session is up
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lease := etcdlock.SessionLease(d)
	first := etcdlock.NamePrefix(d, name) + fmt.Sprintf("%016x", lease)
	if l, err := d.AcquireWait(&lateCancel{Context: ctx}, backend.Request{Name: name, Owner: "owner-x", TTL: time.Minute}); err == nil {
		t.Fatalf("an acquisition whose ctx ended in flight = %v, want an error", l)
	}
	y := drivertest.Acquire(t, ctx, d, name, "owner-y", true)
	if ks := keysOf(t, ctx, admin, d, name); len(ks) != 1 || ks[0] == first {
		t.Errorf("keys of the next hold: %q, want one other than %q", ks, first)
	}
	if err := other.ForceRelease(ctx, name); err != nil {
		t.Fatal(err)
	}
	w := drivertest.Acquire(t, ctx, other, name, "owner-w", true)
	// The failed acquisition's Put lands now.
	if _, err := admin.Put(ctx, first, "owner-x", clientv3.WithLease(clientv3.LeaseID(lease))); err != nil {
		t.Fatal(err)
	}
	if err := y.Release(ctx); !errors.Is(err, backend.ErrLost) {
		t.Errorf("the force-released hold's Release = %v, want ErrLost", err)
	}
	if ks := keysOf(t, ctx, admin, d, name); len(ks) != 2 {
		t.Errorf("keys after the stale Release: %q, want the holder's and the late Put's", ks)
	}
	if _, err := admin.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestHoldsOfOneDriverTakeTurns: acquisitions of one name through one
// Driver share the session's key; while they race its plain Deletes, no
// two hold at once and no hold is lost or fails to release.
func TestHoldsOfOneDriverTakeTurns(t *testing.T) {
	srv := single.Get(t)
	ctx := drivertest.Context(t, 2*time.Minute)
	d := openDriver(t, urlOf(srv, "/take-turns", ""))
	const workers, each = 4, 40
	var in, peak atomic.Int32
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			errs <- func() error {
				for i := range each {
					l, err := d.AcquireWait(ctx, backend.Request{Name: "turns", Owner: fmt.Sprintf("w%d-%d", w, i), TTL: time.Minute})
					if err != nil {
						return err
					}
					n := in.Add(1)
					for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
					}
					// Use the hold: a round trip, while others race for it.
					err = l.Renew(ctx, time.Minute)
					in.Add(-1)
					if err != nil {
						return fmt.Errorf("Renew of hold %d of worker %d: %w", i, w, err)
					}
					if err := l.Release(ctx); err != nil {
						return fmt.Errorf("Release of hold %d of worker %d: %w", i, w, err)
					}
					if l.Lost().Fired() {
						return fmt.Errorf("hold %d of worker %d reported lost", i, w)
					}
				}
				return nil
			}()
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if m := peak.Load(); m != 1 {
		t.Errorf("at most %d holds at once, want 1", m)
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
