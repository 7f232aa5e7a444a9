package mongolock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/mongolock"
)

// connect returns a client of the test's database, disconnected when the
// test ends, that counts the commands it sends.
func connect(t *testing.T, uri string) (*mongo.Client, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	mon := &event.CommandMonitor{Started: func(context.Context, *event.CommandStartedEvent) { n.Add(1) }}
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetMonitor(mon))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Disconnect(ctx)
	})
	return c, &n
}

// TestConcurrentFirstAcquire has K drivers take a name that has no
// document yet, all at once: exactly one wins, the others are told it is
// held, and no duplicate key error reaches them.
func TestConcurrentFirstAcquire(t *testing.T) {
	t.Parallel()
	const k = 20
	db := mongoServer.Get(t).NewDatabase(t)
	client, _ := connect(t, db.URI)
	ctx := drivertest.Context(t, time.Minute)
	drivers := make([]*mongolock.Driver, k)
	for i := range drivers {
		d, err := mongolock.New(client, mongolock.WithDatabase(db.Name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		drivers[i] = d
	}
	drivertest.FirstAcquireRaces(t, ctx, drivers, nil)
	t.Logf("mode %s", drivers[0].Mode())
}

// TestClientClockSkew gives two clients clocks an hour fast and an hour
// slow. On MongoDB 4.2+ no client time is used ($$NOW); elsewhere each
// driver measures its offset to the server's clock. Either way the two
// exclude each other, and a fixed lease ends after its TTL for both, not
// at once nor an hour late.
func TestClientClockSkew(t *testing.T) {
	t.Parallel()
	db := mongoServer.Get(t).NewDatabase(t)
	ctx := drivertest.Context(t, time.Minute)
	fast, slow := open(t, db.URI), open(t, db.URI)
	mongolock.SetClockSkew(fast, time.Hour)
	mongolock.SetClockSkew(slow, -time.Hour)
	const ttl = 600 * time.Millisecond
	cf, _ := locker.New(fast, locker.WithTTL(ttl))
	defer cf.Close()
	cs, _ := locker.New(slow, locker.WithTTL(ttl))
	defer cs.Close()
	for _, pair := range [][2]*locker.Client{{cf, cs}, {cs, cf}} {
		name := fmt.Sprintf("skew/%p", pair[0])
		a := pair[0].NewMutex(name, locker.WithFixedLease())
		if err := a.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		locked := time.Now()
		b := pair[1].NewMutex(name)
		if ok, err := b.TryLock(ctx); ok || err != nil {
			t.Fatalf("TryLock by the other clock = %v, %v; want false", ok, err)
		}
		if ok, err := b.LockTimeout(ctx, 10*time.Second); !ok || err != nil {
			t.Fatalf("LockTimeout after the fixed lease = %v, %v", ok, err)
		}
		if got := time.Since(locked); got < ttl/2 || got > ttl+5*time.Second {
			t.Errorf("a lease of %v ended for the other clock after %v", ttl, got)
		}
		_ = b.Unlock(ctx)
		_ = a.Unlock(ctx)
	}
	t.Logf("mode %s", fast.Mode())
}

// TestUnusualNames stores names that would matter to a query language or
// a regular expression.
func TestUnusualNames(t *testing.T) {
	t.Parallel()
	db := mongoServer.Get(t).NewDatabase(t)
	d, other := open(t, db.URI), open(t, db.URI)
	ctx := drivertest.Context(t, time.Minute)
	names := []string{
		"$where", "$gt", `{"$ne": null}`, "a.b.c", "quote'", `quote"`, "back\\slash", "re.*gex+[x]",
		"h/looks-like-a-head", "f/1/looks-like-history", "ünïcødé-日本-🔒", "Case", "case", "trail ", "trail",
		strings.Repeat("é", mongolock.MaxNameLen/2),
	}
	for i, n := range names {
		l, err := d.Acquire(ctx, backend.Request{Name: n, Owner: fmt.Sprintf("o%d", i), TTL: time.Minute})
		if err != nil {
			t.Fatalf("Acquire(%.40q): %v", n, err)
		}
		defer l.Release(ctx)
	}
	for _, n := range names {
		if _, err := other.Acquire(ctx, backend.Request{Name: n, Owner: "other", TTL: time.Minute}); !errors.Is(err, backend.ErrHeld) {
			t.Errorf("Acquire(%.40q) by another owner = %v, want ErrHeld", n, err)
		}
	}
	holds, err := d.Holds(ctx, "")
	if err != nil || len(holds) != len(names) {
		t.Errorf("Holds = %d holds, %v; want %d", len(holds), err, len(names))
	}
	for prefix, want := range map[string]int{"re.*": 1, ".": 0, "$": 2, "trail": 2, "f/1/": 1} {
		if hs, err := d.Holds(ctx, prefix); err != nil || len(hs) != want {
			t.Errorf("Holds(%q) = %d holds, %v; want %d", prefix, len(hs), err, want)
		}
	}
	if _, err := d.Acquire(ctx, backend.Request{Name: strings.Repeat("n", mongolock.MaxNameLen+1), Owner: "o", TTL: time.Minute}); !errors.Is(err, backend.ErrInvalidName) {
		t.Errorf("Acquire of a too long name = %v, want ErrInvalidName", err)
	}
}

// TestNewDoesNotDisconnect: a Driver built from the application's client
// leaves it connected.
func TestNewDoesNotDisconnect(t *testing.T) {
	t.Parallel()
	db := mongoServer.Get(t).NewDatabase(t)
	client, _ := connect(t, db.URI)
	d, err := mongolock.New(client, mongolock.WithDatabase(db.Name), mongolock.WithCollection("mine"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := drivertest.Context(t, time.Minute)
	if _, err := d.Acquire(ctx, backend.Request{Name: "n", Owner: "o", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := client.Database(db.Name).Collection("mine").CountDocuments(ctx, map[string]any{}); err != nil || n == 0 {
		t.Errorf("the client after the Driver's Close: %d documents, %v", n, err)
	}
}

// TestLockerOpen opens the driver through locker.Open, as configuration
// would.
func TestLockerOpen(t *testing.T) {
	t.Parallel()
	db := mongoServer.Get(t).NewDatabase(t)
	ctx := drivertest.Context(t, time.Minute)
	drivertest.LockOnce(t, ctx, db.URI+"?collection=opened")
}

// TestQueriesUnderContention measures what waiting costs the server, in
// commands counted by a command monitor, for docs/drivers/mongodb.md. A
// waiter's look is one attempt: in ModeUpdate one findAndModify, in
// ModeHistory two reads (the head and the document after the one it
// names) while the lock is held. Package locker's back-off looks about
// five times a second at its cap (a pause drawn from 125–250 ms), so a
// waiter costs about 11 commands a second in ModeHistory (10–13
// measured): the bound catches a look that costs twice as many commands,
// or a waiter that looks twice as often.
func TestQueriesUnderContention(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	db := mongoServer.Get(t).NewDatabase(t)
	client, cmds := connect(t, db.URI)
	ctx := drivertest.Context(t, time.Minute)
	var last *mongolock.Driver
	newClient := func() *locker.Client {
		d, err := mongolock.New(client, mongolock.WithDatabase(db.Name))
		if err != nil {
			t.Fatal(err)
		}
		last = d // its Mode is known once it has been used
		c, _ := locker.New(d, locker.WithTTL(10*time.Second))
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	l := drivertest.MeasureLoad(t, ctx, 8, newClient, cmds.Load)
	t.Logf("mongodb (%s): %s", last.Mode(), l.Summary("commands"))
	if l.PerWaiter() > 25 {
		t.Errorf("waiting costs %.1f commands per waiter per second, want at most 25", l.PerWaiter())
	}
}
