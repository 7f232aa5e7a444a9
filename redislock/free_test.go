package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/redislock"
)

// The acquire and release scripts take and free a lock that has no queue
// before they define the queue's functions (scripts/queue_acquire.lua).
// These tests hold that path to the queue's rules: a lock that is free
// while its queue is not goes to the oldest waiter, and the tokens of the
// two paths' grants keep increasing.

// TestAQueuedWaiterIsNotOvertakenByANewcomer: the lock is free while a
// waiter is queued (its holder's lease ran out; here its key is deleted).
// A newcomer's Acquire (TryLock) hands the lock to that waiter and
// returns ErrHeld; a newcomer's AcquireWait (Lock) hands it to the waiter
// too and queues behind it. Every grant's token is above the one before,
// from the first grant of the free lock to the next after the queue.
func TestAQueuedWaiterIsNotOvertakenByANewcomer(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, 2*time.Minute)
	srv := standalone.Get(t)
	url := standaloneURL(t)
	name := "overtake/" + t.Name()
	open := func() *redislock.Driver { return openAny(t, url).(*redislock.Driver) }
	holder, waiters, newcomer := open(), open(), open()
	req := func(owner string) backend.Request {
		return backend.Request{Name: name, Owner: owner, TTL: time.Minute}
	}
	var tokens []uint64
	took := func(l backend.Lease, who string) {
		t.Helper()
		if n := len(tokens); n > 0 && l.Token() <= tokens[n-1] {
			t.Errorf("%s got token %d, after %v: tokens must increase", who, l.Token(), tokens)
		}
		tokens = append(tokens, l.Token())
	}
	took(drivertest.Acquire(t, ctx, holder, name, "holder", false), "the holder, on the free lock")

	// The lock is free while a waiter is queued.
	first := waitAsync(ctx, waiters, req("first"))
	awaitQueue(t, ctx, waiters, name, 1)
	if _, err := srv.Do(ctx, "DEL", holder.Key(name)); err != nil {
		t.Fatal(err)
	}
	if l, err := newcomer.Acquire(ctx, req("trylock")); !errors.Is(err, backend.ErrHeld) {
		if l != nil {
			_ = l.Release(ctx)
		}
		t.Fatalf("a newcomer's Acquire while a waiter is queued = %v, want ErrHeld: it overtook the waiter", err)
	}
	fl := awaitGrant(t, first, "the queued waiter, after a newcomer's Acquire")
	took(fl, "the queued waiter")

	// Again, with a newcomer that waits.
	second := waitAsync(ctx, waiters, req("second"))
	awaitQueue(t, ctx, waiters, name, 1)
	if _, err := srv.Do(ctx, "DEL", holder.Key(name)); err != nil {
		t.Fatal(err)
	}
	third := waitAsync(ctx, newcomer, req("lock"))
	sl := awaitGrant(t, second, "the queued waiter, after a newcomer's AcquireWait")
	took(sl, "the queued waiter")
	awaitQueue(t, ctx, waiters, name, 1) // the newcomer, behind the waiter that holds
	select {
	case r := <-third:
		t.Fatalf("the newcomer's AcquireWait returned (%v) while the waiter ahead of it holds the lock", r.err)
	default:
	}
	if err := sl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	tl := awaitGrant(t, third, "the newcomer, handed the lock by the waiter's release")
	took(tl, "the newcomer")
	if err := tl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	took(drivertest.Acquire(t, ctx, newcomer, name, "last", false), "an owner of the free lock after the queue")
}

// TestAFreeLockGrantedWithAnInboxReservesABlock: a Driver that listens on
// its inbox gets a block of tokens with a free lock, as with a hand-off,
// to pass the lock on within the Driver (chain.go).
func TestAFreeLockGrantedWithAnInboxReservesABlock(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, 2*time.Minute)
	url := standaloneURL(t)
	name := "block/" + t.Name()
	holder := openAny(t, url)
	d := openAny(t, url).(*redislock.Driver)
	// A wait in the queue subscribes d's inbox; the hand-off reserves.
	h := drivertest.Acquire(t, ctx, holder, name, "holder", false)
	got := waitAsync(ctx, d, backend.Request{Name: name, Owner: "handed", TTL: time.Minute})
	awaitQueue(t, ctx, d, name, 1)
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	handed := awaitGrant(t, got, "the waiter")
	block := redislock.PassTokens(d, name)
	if block < 2 {
		t.Fatalf("a hand-off to a Driver that listens left %d token(s) to pass; want a block", block)
	}
	if err := handed.Release(ctx); err != nil {
		t.Fatal(err)
	}
	free := drivertest.Acquire(t, ctx, d, name, "free", true)
	if n := redislock.PassTokens(d, name); n != block {
		t.Errorf("the free lock's grant left %d token(s) to pass, the hand-off's %d", n, block)
	}
	if free.Token() <= handed.Token() {
		t.Errorf("the free lock's token %d is not above the hand-off's %d", free.Token(), handed.Token())
	}
	if err := free.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next := drivertest.Acquire(t, ctx, holder, name, "next", false)
	if want := free.Token() + uint64(block) + 1; next.Token() != want {
		t.Errorf("the grant after the block has token %d, want %d (the block ends at %d)", next.Token(), want, want-1)
	}
	if err := next.Release(ctx); err != nil {
		t.Error(err)
	}
}

// granted is the outcome of an AcquireWait.
type granted struct {
	l   backend.Lease
	err error
}

// waitAsync starts d.AcquireWait(ctx, r) and returns its outcome's channel.
func waitAsync(ctx context.Context, d backend.Driver, r backend.Request) <-chan granted {
	got := make(chan granted, 1)
	go func() {
		l, err := d.(backend.Waiter).AcquireWait(ctx, r)
		got <- granted{l, err}
	}()
	return got
}

// awaitGrant returns the lease of an AcquireWait started by waitAsync, or
// fails the test.
func awaitGrant(t *testing.T, got <-chan granted, what string) backend.Lease {
	t.Helper()
	r := drivertest.Receive(t, got, 10*time.Second, what+": AcquireWait")
	if r.err != nil {
		t.Fatalf("%s: AcquireWait: %v", what, r.err)
	}
	return r.l
}

// awaitQueue waits until exactly n owners are in name's queue, as d
// counts them.
func awaitQueue(t *testing.T, ctx context.Context, d backend.Driver, name string, n int) {
	t.Helper()
	q := d.(backend.QueueInspector)
	drivertest.Eventually(t, 30*time.Second, fmt.Sprintf("%d waiter(s) on %s", n, name), func() bool {
		k, err := q.Waiters(ctx, name)
		return err == nil && k == n
	})
}
