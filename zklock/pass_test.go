package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/zklock"
)

// The checks of passing a hold inside one Client (backend.Passer): the
// node stays and changes owner, with a token greater than the last one and
// lower than the next owner's; never ahead of a waiter of another Client.

// pass passes l to owner, or fails the test.
func pass(t *testing.T, ctx context.Context, l backend.Lease, owner string) backend.Lease {
	t.Helper()
	next, err := l.(backend.Passer).Pass(ctx, backend.Request{Name: "unused", Owner: owner, TTL: time.Minute})
	if err != nil || next == nil {
		t.Fatalf("Pass to %s = %v, %v; want a lease", owner, next, err)
	}
	return next
}

// passing returns two Drivers on the standalone server, and a hold of name
// on the first.
func passing(t *testing.T, name string) (context.Context, *zklock.Driver, *zklock.Driver, backend.Lease) {
	ctx := drivertest.Context(t, time.Minute)
	url := urlOf(standalone.Get(t), "/"+name, "session_timeout=4s")
	d, other := openDriver(t, url), openDriver(t, url)
	return ctx, d, other, drivertest.Acquire(t, ctx, d, name, "first", true)
}

func TestPassKeepsTheNodeWithAGreaterToken(t *testing.T) {
	const name = "passed"
	ctx, d, other, first := passing(t, name)
	second := pass(t, ctx, first, "second")
	third := pass(t, ctx, second, "third")
	if !(first.Token() < second.Token() && second.Token() < third.Token()) {
		t.Errorf("tokens %d, %d, %d; want them increasing", first.Token(), second.Token(), third.Token())
	}
	nodes, err := lockChildren(adminConn(t, standalone.Get(t)), zklock.Dir(d, name))
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes of the lock = %v, %v; want the first owner's alone", nodes, err)
	}
	hs, err := d.Holds(ctx, name)
	if err != nil || len(hs) != 1 || hs[0].Owner != "third" || hs[0].Token != third.Token() {
		t.Errorf("Holds = %+v, %v; want third's hold with token %d", hs, err, third.Token())
	}
	if _, err := other.Acquire(ctx, backend.Request{Name: name, Owner: "other", TTL: time.Minute}); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("another Driver's Acquire of a passed hold = %v, want ErrHeld", err)
	}
	if err := third.Renew(ctx, time.Minute); err != nil {
		t.Errorf("Renew of the passed hold: %v", err)
	}
	if err := third.Release(ctx); err != nil {
		t.Fatalf("Release of the passed hold: %v", err)
	}
	after := drivertest.Acquire(t, ctx, other, name, "other", false)
	defer after.Release(ctx)
	if after.Token() <= third.Token() {
		t.Errorf("the next owner's token %d is not above the passed hold's %d", after.Token(), third.Token())
	}
}

// TestPassDeclinesWhenAnotherClientWaits: a waiter of another Client that
// queued behind the hold is served first.
func TestPassDeclinesWhenAnotherClientWaits(t *testing.T) {
	const name = "fair"
	ctx, _, other, l := passing(t, name)
	l = pass(t, ctx, l, "passed") // passes while nobody else waits
	got := make(chan backend.Lease, 1)
	go func() { got <- drivertest.Acquire(t, ctx, other, name, "waiter", true) }()
	drivertest.Eventually(t, 10*time.Second, "the other Client's waiter queued", func() bool { return zklock.Waiting(other) == 1 })
	next, err := l.(backend.Passer).Pass(ctx, backend.Request{Name: name, Owner: "next", TTL: time.Minute})
	if err != nil || next != nil {
		t.Fatalf("Pass with another Client's waiter queued = %v, %v; want nil, nil", next, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after the declined Pass: %v", err)
	}
	w := drivertest.Receive(t, got, 10*time.Second, "the other Client's grant")
	defer w.Release(ctx)
	if w.Token() <= l.Token() {
		t.Errorf("the waiter's token %d is not above the passed hold's %d", w.Token(), l.Token())
	}
}

// TestHoldsPassWithinAClient: handles of one Client that take turns on a
// lock pass it to each other — no node is created for most acquisitions —
// and never hold it together.
func TestHoldsPassWithinAClient(t *testing.T) {
	z := standalone.Get(t)
	ctx := drivertest.Context(t, time.Minute)
	c := drivertest.Client(t, ctx, urlOf(z, "/pass-client", "session_timeout=4s"))
	d := c.Driver().(*zklock.Driver)
	const handles, total = 8, 400
	drivertest.TakeTurns(t, ctx, c, "turns", handles, total)
	created := zklock.CreatedTokens(d)
	t.Logf("%d acquisitions by %d handles of one Client: %d nodes created", total, handles, created)
	if created > total/4 {
		t.Errorf("%d of %d acquisitions created a node: holds are not passed within the Client", created, total)
	}
}
