package coalesce

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/redisserver"
)

var (
	servers    testserver.Shared
	standalone = testserver.NewLazy(&servers, redisserver.Redis)
)

func TestMain(m *testing.M) { os.Exit(drivertest.Main(m, &servers)) }

// count counts its calls in KEYS[1] and answers ARGV[1]: whether a call
// ran, and whose reply a caller got, can both be read.
var count = redis.NewScript("redis.call('incr', KEYS[1]) return ARGV[1]")

// setup returns a client of the shared server whose connections go
// through a FaultNet, the FaultNet, a prefix of the test's own keys, and a
// ctx; the script is loaded, so that no call falls back to EVAL.
func setup(t *testing.T) (*redis.Client, *conformance.FaultNet, string, context.Context) {
	t.Helper()
	fn := conformance.NewFaultNet()
	c := redis.NewClient(&redis.Options{Addr: standalone.Get(t).Addr, ContextTimeoutEnabled: true, Dialer: fn.Dial})
	t.Cleanup(func() {
		fn.Resume()
		_ = c.Close()
	})
	ctx := drivertest.Context(t, time.Minute)
	if err := count.Load(ctx, c).Err(); err != nil {
		t.Fatal(err)
	}
	return c, fn, fmt.Sprintf("%s:%d:", t.Name(), time.Now().UnixNano()), ctx
}

// ran reports how many times the script ran for key.
func ran(t *testing.T, ctx context.Context, c *redis.Client, key string) int {
	t.Helper()
	n, err := c.Get(ctx, key).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return n
}

// awaitLoad waits until co has the load given.
func awaitLoad(t *testing.T, co *Coalescer, direct, queued int, flushing bool) {
	t.Helper()
	drivertest.Eventually(t, time.Minute, fmt.Sprintf("%d direct, %d queued, flushing %v", direct, queued, flushing), func() bool {
		d, q, f := co.Load()
		return d == direct && q == queued && f == flushing
	})
}

// runAsync starts co.Run of the call of prefix+name, whose reply is name,
// and returns its error's channel.
func runAsync(ctx context.Context, co *Coalescer, prefix, name string, abandoned func(any, error)) <-chan error {
	got := make(chan error, 1)
	go func() {
		_, err := co.Run(ctx, []string{prefix + name}, []any{name}, abandoned)
		got <- err
	}()
	return got
}

// TestEveryCallerGetsItsReply: many calls at once, some on their own and
// the rest in pipelines, each run once with its caller's reply; and with
// every call pipelined, the calls share the connection's writes.
func TestEveryCallerGetsItsReply(t *testing.T) {
	for _, direct := range []int{2, 0} {
		t.Run(fmt.Sprint("direct=", direct), func(t *testing.T) {
			c, fn, prefix, ctx := setup(t)
			co := New(c, count, direct, time.Minute)
			defer co.Close()
			const n = 300
			start := make(chan struct{})
			before := fn.Requests()
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					res, err := co.Run(ctx, []string{fmt.Sprint(prefix, i)}, []any{i}, nil)
					if err != nil || res != fmt.Sprint(i) {
						t.Errorf("call %d = %v, %v", i, res, err)
					}
				})
			}
			close(start)
			wg.Wait()
			writes := fn.Requests() - before
			for i := range n {
				if k := ran(t, ctx, c, fmt.Sprint(prefix, i)); k != 1 {
					t.Errorf("call %d ran %d times", i, k)
				}
			}
			t.Logf("%d calls in %d writes", n, writes)
			if direct == 0 && writes >= n {
				t.Errorf("%d pipelined calls took %d writes: they do not share pipelines", n, writes)
			}
		})
	}
}

// TestAQueuedCallWhoseCallerGivesUpIsNotSent: a call waiting for a
// pipeline (the one before it is on its way, stalled) whose ctx ends
// returns at once, Gone, and never runs.
func TestAQueuedCallWhoseCallerGivesUpIsNotSent(t *testing.T) {
	c, fn, prefix, ctx := setup(t)
	co := New(c, count, 0, time.Minute)
	defer co.Close()
	fn.Pause()
	first := runAsync(ctx, co, prefix, "first", nil)
	awaitLoad(t, co, 0, 0, true) // the first call is on its way
	gctx, giveUp := context.WithCancel(ctx)
	second := runAsync(gctx, co, prefix, "second", func(any, error) {
		t.Error("a call that was never sent got a reply")
	})
	awaitLoad(t, co, 0, 1, true)
	giveUp()
	if err := drivertest.Receive(t, second, time.Minute, "the queued call"); !Gone(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("the queued call whose ctx ended = %v, want Gone with context.Canceled", err)
	}
	fn.Resume()
	if err := drivertest.Receive(t, first, time.Minute, "the first call"); err != nil {
		t.Fatal(err)
	}
	awaitLoad(t, co, 0, 0, false)
	if k := ran(t, ctx, c, prefix+"second"); k != 0 {
		t.Errorf("the call taken out of the queue ran %d times", k)
	}
}

// TestASentCallIsWaitedFor: a caller whose ctx ends after its call was
// sent waits for the reply, so that what it undoes comes after what the
// call did, and returns ctx's error, not Gone.
func TestASentCallIsWaitedFor(t *testing.T) {
	c, fn, prefix, ctx := setup(t)
	co := New(c, count, 0, time.Minute)
	defer co.Close()
	fn.Pause()
	gctx, giveUp := context.WithCancel(ctx)
	got := runAsync(gctx, co, prefix, "sent", func(any, error) {
		t.Error("the reply of a call waited for went to the abandoned function")
	})
	awaitLoad(t, co, 0, 0, true)
	giveUp()
	fn.Resume()
	err := drivertest.Receive(t, got, time.Minute, "the sent call")
	if !errors.Is(err, context.Canceled) || Gone(err) {
		t.Fatalf("the sent call whose ctx ended = %v, want context.Canceled, not Gone", err)
	}
	if k := ran(t, ctx, c, prefix+"sent"); k != 1 {
		t.Errorf("the call ran %d times before its caller returned, want 1", k)
	}
}

// TestAnAbandonedCallsReplyGoesToItsFunction: a caller gives up on a sent
// call after the patience: it returns Gone, and the reply, once it comes,
// goes to the abandoned function.
func TestAnAbandonedCallsReplyGoesToItsFunction(t *testing.T) {
	c, fn, prefix, ctx := setup(t)
	co := New(c, count, 0, time.Millisecond)
	defer co.Close()
	fn.Pause()
	gctx, giveUp := context.WithCancel(ctx)
	replies := make(chan any, 1)
	got := runAsync(gctx, co, prefix, "abandoned", func(res any, err error) {
		if err != nil {
			t.Errorf("the abandoned call's reply: %v", err)
		}
		replies <- res
	})
	awaitLoad(t, co, 0, 0, true)
	giveUp()
	if err := drivertest.Receive(t, got, time.Minute, "the abandoned call"); !Gone(err) {
		t.Fatalf("the call given up after the patience = %v, want Gone", err)
	}
	fn.Resume()
	if res := drivertest.Receive(t, replies, time.Minute, "the abandoned call's reply"); res != "abandoned" {
		t.Errorf("the abandoned function got %v", res)
	}
}
