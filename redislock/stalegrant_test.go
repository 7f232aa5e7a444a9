package redislock_test

import (
	"testing"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/redislock"
)

// TestAPausedWaiterNeverTakesAStaleGrant: a waiter is paused (its connections stall, as when its process is
// SIGSTOPped) while it waits; the holder releases and Redis hands the lock
// to the waiter's owner, publishing the grant to a process that cannot
// hear; that lease runs out unused and other owners go on with higher
// tokens. When the waiter resumes, the grant's message and the reply of its
// own refresh call (which puts the same owner back in the queue) arrive in
// either order. A driver that takes the message for a grant returns from
// AcquireWait with the stale grant's token, below its predecessors'; the
// waiter must return a grant newer than every token handed out while it was
// paused.
//
// It runs at the SPI, without package locker, whose own check (a grant
// that arrives after its lease could have run out is given back) would
// hide a driver that took the stale grant.
func TestAPausedWaiterNeverTakesAStaleGrant(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, time.Minute)
	url := standaloneURL(t)
	name := "stale/" + t.Name()
	const ttl = time.Second
	holderD := openAny(t, url)
	probeD := openAny(t, url)
	fn := conformance.NewFaultNet()
	waiterD := openAny(t, url, redislock.WithDialer(fn.Dial))

	lh, err := holderD.Acquire(ctx, backend.Request{Name: name, Owner: "holder", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   backend.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := waiterD.(backend.Waiter).AcquireWait(ctx, backend.Request{Name: name, Owner: "waiter", TTL: ttl})
		got <- result{l, err}
	}()
	q := probeD.(backend.QueueInspector)
	drivertest.Eventually(t, 10*time.Second, "the waiter is queued", func() bool {
		n, err := q.Waiters(ctx, name)
		return err == nil && n == 1
	})
	fn.Pause()
	// Redis hands the lock to the paused waiter's owner.
	if err := lh.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Its lease runs out unused; other owners take the lock, with higher
	// tokens, and the last of them holds it when the waiter resumes: the
	// waiter's refresh call then puts its owner back in the queue, and the
	// grant's message, which comes with it, is stale.
	var highest uint64
	var last backend.Lease
	for i := 0; i < 3; {
		l, err := probeD.Acquire(ctx, backend.Request{Name: name, Owner: "probe-" + string(rune('a'+i)), TTL: 30 * time.Second})
		if err != nil {
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		highest = max(highest, l.Token())
		if i < 2 {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		} else {
			last = l
		}
		i++
	}
	fn.Resume()
	drivertest.Eventually(t, 10*time.Second, "the resumed waiter is queued again", func() bool {
		n, err := q.Waiters(ctx, name)
		return err == nil && n == 1 || len(got) > 0
	})
	if err := last.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("the resumed waiter did not return")
	}
	if r.err != nil {
		t.Fatalf("the resumed waiter: %v", r.err)
	}
	defer r.l.Release(ctx)
	if tok := r.l.Token(); tok <= highest {
		t.Fatalf("the resumed waiter returned token %d, not above %d granted while it was paused: a stale grant", tok, highest)
	}
	if _, err := probeD.Acquire(ctx, backend.Request{Name: name, Owner: "probe-z", TTL: time.Second}); err == nil {
		t.Fatal("the resumed waiter holds nothing in Redis")
	}
}
