package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/redislock"
)

// faultyDriver opens a Driver on the shared standalone server whose
// connections go through a FaultNet, without keyspace events (whose
// subscriptions would add their own writes), and takes and releases a
// lock once, so that the scripts are loaded and a connection is open.
func faultyDriver(t *testing.T, ctx context.Context, query string) (*redislock.Driver, *conformance.FaultNet) {
	t.Helper()
	fn := conformance.NewFaultNet()
	t.Cleanup(fn.Resume)
	d := openAny(t, standaloneURL(t)+"?keyspace_events=false"+query, redislock.WithDialer(fn.Dial)).(*redislock.Driver)
	l := drivertest.Acquire(t, ctx, d, fmt.Sprintf("warm/%s/%d", t.Name(), time.Now().UnixNano()), "warm", false)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return d, fn
}

// TestAcquisitionsSharePipelines takes many names at once through one
// Driver: the calls beyond the few in flight on their own share pipelines
// (fewer writes on the connections than calls), and every one of them is
// granted its own lock with a token of its own.
func TestAcquisitionsSharePipelines(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, time.Minute)
	d, fn := faultyDriver(t, ctx, "&pool_size=64")
	const n, jobs = 4000, 64
	prefix := fmt.Sprintf("share/%d/", time.Now().UnixNano())
	leases := make([]backend.Lease, n)
	before := fn.Requests()
	var wg sync.WaitGroup
	for j := range jobs {
		wg.Go(func() {
			for i := j; i < n; i += jobs {
				l, err := d.Acquire(ctx, backend.Request{Name: fmt.Sprint(prefix, i), Owner: fmt.Sprint("o", i), TTL: time.Minute})
				if err != nil {
					t.Errorf("Acquire %d: %v", i, err)
					return
				}
				leases[i] = l
			}
		})
	}
	wg.Wait()
	writes := fn.Requests() - before
	if t.Failed() {
		return
	}
	t.Logf("%d acquisitions from %d goroutines in %d writes (the connections' handshakes included)", n, jobs, writes)
	if writes >= n {
		t.Errorf("%d concurrent acquisitions took %d writes: they do not share pipelines", n, writes)
	}
	for i, l := range leases {
		if l.Token() == 0 {
			t.Errorf("lease %d has token 0", i)
		}
		// A second owner must find each lock held.
		if _, err := d.Acquire(ctx, backend.Request{Name: fmt.Sprint(prefix, i), Owner: "other", TTL: time.Minute}); err == nil {
			t.Fatalf("lock %d granted to a second owner", i)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release %d: %v", i, err)
		}
	}
}

// TestAPipelinedAcquisitionGivenUpLeavesNothing: with the Driver's direct
// calls stalled (its connections paused), acquisitions wait for, or are
// on their way in, a pipeline; their callers give up. One still queued
// returns at once and is never sent; one sent and abandoned after
// CleanupTimeout is released once its reply comes; one sent and answered
// within it is released before its Acquire returns. The locks are free
// afterwards.
func TestAPipelinedAcquisitionGivenUpLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, 2*time.Minute)
	d, fn := faultyDriver(t, ctx, "")
	srv := standalone.Get(t)
	prefix := fmt.Sprintf("given-up/%d/", time.Now().UnixNano())
	exists := func(name string) bool {
		t.Helper()
		n, err := srv.Do(ctx, "EXISTS", d.Key(prefix+name))
		if err != nil {
			t.Fatal(err)
		}
		return n != int64(0)
	}
	awaitLoad := func(direct, queued int, flushing bool) {
		t.Helper()
		drivertest.Eventually(t, time.Minute, fmt.Sprintf("%d direct, %d queued acquisitions, flushing %v", direct, queued, flushing), func() bool {
			a, b, c := redislock.AcquireLoad(d)
			return a == direct && b == queued && c == flushing
		})
	}
	acquire := func(ctx context.Context, name string) <-chan granted {
		got := make(chan granted, 1)
		go func() {
			l, err := d.Acquire(ctx, backend.Request{Name: prefix + name, Owner: name, TTL: time.Minute})
			got <- granted{l, err}
		}()
		return got
	}
	// stall pauses the connections and fills the direct calls.
	stall := func(round string) []<-chan granted {
		fn.Pause()
		var direct []<-chan granted
		for i := range redislock.DirectAcquires {
			direct = append(direct, acquire(ctx, fmt.Sprint(round, "/direct/", i)))
		}
		awaitLoad(redislock.DirectAcquires, 0, false)
		return direct
	}
	release := func(direct []<-chan granted) {
		t.Helper()
		for _, got := range direct {
			if err := awaitGrant(t, got, "a direct call").Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	givenUp := func(got <-chan granted, what string) {
		t.Helper()
		r := drivertest.Receive(t, got, time.Minute, what)
		if r.l != nil || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("%s = %v, %v; want context.Canceled", what, r.l, r.err)
		}
	}

	direct := stall("1")
	sentCtx, giveUpSent := context.WithCancel(ctx)
	sent := acquire(sentCtx, "sent")
	awaitLoad(redislock.DirectAcquires, 0, true) // on its way in a pipeline
	queuedCtx, giveUpQueued := context.WithCancel(ctx)
	queued := acquire(queuedCtx, "queued")
	awaitLoad(redislock.DirectAcquires, 1, true)
	giveUpQueued()
	givenUp(queued, "the queued acquisition")
	giveUpSent()
	givenUp(sent, "the sent acquisition, abandoned") // after CleanupTimeout, still stalled
	fn.Resume()
	release(direct)
	awaitLoad(0, 0, false)
	drivertest.Eventually(t, time.Minute, "the abandoned acquisition's grant released", func() bool { return !exists("sent") })
	if exists("queued") {
		t.Error("the acquisition given up in the queue was sent")
	}

	direct = stall("2")
	answeredCtx, giveUpAnswered := context.WithCancel(ctx)
	answered := acquire(answeredCtx, "answered")
	awaitLoad(redislock.DirectAcquires, 0, true)
	giveUpAnswered()
	gaveUp := time.Now()
	fn.Resume()
	givenUp(answered, "the sent acquisition, answered")
	if time.Since(gaveUp) < redislock.CleanupTimeout && exists("answered") {
		// Answered within CleanupTimeout: the caller's clean-up ran
		// before Acquire returned.
		t.Error("an acquisition whose caller gave up returned with its lock held")
	}
	release(direct)
	drivertest.Eventually(t, time.Minute, "the answered acquisition's grant released", func() bool { return !exists("answered") })

	for _, name := range []string{"sent", "queued", "answered"} {
		l := drivertest.Acquire(t, ctx, d, prefix+name, "after", false)
		if err := l.Release(ctx); err != nil {
			t.Error(err)
		}
	}
}
