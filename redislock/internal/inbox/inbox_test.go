package inbox

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/internal/drivertest"
)

// events records what an Inbox calls back.
type events struct {
	mu          sync.Mutex
	queued      []string
	reconnected int
}

func (e *events) onQueued(key string) { e.mu.Lock(); e.queued = append(e.queued, key); e.mu.Unlock() }
func (e *events) onReconnected()      { e.mu.Lock(); e.reconnected++; e.mu.Unlock() }

func (e *events) counts() (queued []string, reconnected int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.queued...), e.reconnected
}

func newInbox(t *testing.T, c redis.UniversalClient) (*Inbox, *events) {
	t.Helper()
	e := &events{}
	b := New(c, fmt.Sprintf("t%d:", time.Now().UnixNano()), e.onQueued, e.onReconnected)
	t.Cleanup(b.Close)
	return b, e
}

// subscribers is how many connections are subscribed to channel.
func subscribers(t *testing.T, c *redis.Client, channel string) int64 {
	t.Helper()
	n, err := c.PubSubNumSub(t.Context(), channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n[channel]
}

// TestGrantsReachTheirWaiter: a grant published on the inbox reaches the
// waiter it names, the newest one if two are unread, with its reserved
// tokens; a grant to an owner that does not wait, or a message that is not
// a grant, reaches nobody; a "q" goes to the callback.
func TestGrantsReachTheirWaiter(t *testing.T) {
	c, ctx := client(t)
	b, e := newInbox(t, c)
	if b.Ready() {
		t.Fatal("an inbox nobody joined is subscribed")
	}
	w := b.Join("o1")
	other := b.Join("o2")
	if err := b.AwaitReady(ctx, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if !b.Ready() {
		t.Fatal("not subscribed after AwaitReady")
	}
	publish := func(msg string) {
		t.Helper()
		if err := c.Publish(ctx, b.Channel(), msg).Err(); err != nil {
			t.Fatal(err)
		}
	}
	publish("7 o1")
	if g := drivertest.Receive(t, w.Grants(), time.Minute, "a grant"); g != (Grant{7, 7}) {
		t.Errorf("grant %+v, want {7 7}", g)
	}
	// Unread, the older of two grants lapses: the listener keeps the newest.
	publish("8 o1")
	publish("9-72 o1")
	publish("q golocker:{n}")
	drivertest.Eventually(t, time.Minute, "the q", func() bool { q, _ := e.counts(); return len(q) == 1 })
	if g := drivertest.Receive(t, w.Grants(), time.Minute, "the newest grant"); g != (Grant{9, 72}) {
		t.Errorf("grant %+v, want {9 72}", g)
	}
	if q, _ := e.counts(); q[0] != "golocker:{n}" {
		t.Errorf("q for %q", q[0])
	}
	publish("10 nobody")
	publish("x o2")
	publish("11-x o2")
	b.Leave(w)
	publish("12 o1")
	publish("13 o2") // a mark: the messages before it are read
	if g := drivertest.Receive(t, other.Grants(), time.Minute, "o2's grant"); g.Token != 13 {
		t.Errorf("o2 got grant %+v, want the mark 13: a bad message reached it", g)
	}
	select {
	case g := <-w.Grants():
		t.Errorf("a waiter that left got %+v", g)
	default:
	}
}

// TestAReconnectWakesTheWaiters: when go-redis subscribes again after a
// reconnect, every waiter is woken (a grant may have been lost) and the
// callback runs.
func TestAReconnectWakesTheWaiters(t *testing.T) {
	c, ctx := client(t)
	b, e := newInbox(t, c)
	w := b.Join("o")
	if err := b.AwaitReady(ctx, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	drivertest.Receive(t, w.Wakes(), time.Minute, "the wake-up after a reconnect")
	drivertest.Eventually(t, time.Minute, "the reconnect callback", func() bool { _, n := e.counts(); return n == 1 })
	drivertest.Eventually(t, time.Minute, "subscribed again", func() bool { return subscribers(t, c, b.Channel()) == 1 })
}

// TestCloseUnsubscribes: Start subscribes without a waiter; Close ends the
// subscription, and nothing starts it again.
func TestCloseUnsubscribes(t *testing.T) {
	c, ctx := client(t)
	b, _ := newInbox(t, c)
	b.Start()
	b.Start()
	if err := b.AwaitReady(ctx, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	drivertest.Eventually(t, time.Minute, "one subscription", func() bool { return subscribers(t, c, b.Channel()) == 1 })
	b.Close()
	drivertest.Eventually(t, time.Minute, "no subscription after Close", func() bool { return subscribers(t, c, b.Channel()) == 0 })
	b.Start()
	b.Join("late")
	if b.Ready() || subscribers(t, c, b.Channel()) != 0 {
		t.Error("an inbox subscribed again after Close")
	}
}

// TestAWaiterGoesOnWithoutAConfirmation: a SUBSCRIBE that is not
// confirmed within the bound lets the waiter go on (it polls), and the
// next ones do not wait; a closed Driver ends the wait at once.
func TestAWaiterGoesOnWithoutAConfirmation(t *testing.T) {
	srv := drivertest.SilentServer(t) // takes connections, answers nothing
	// Short timeouts: go-redis does not end a read on a silent connection
	// when the ctx is cancelled, and Close waits for the subscriber.
	c := redis.NewClient(&redis.Options{Addr: srv, ContextTimeoutEnabled: true, MaxRetries: -1, ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	ctx := drivertest.Context(t, time.Minute)
	b, _ := newInbox(t, c)
	b.Join("o")
	done := make(chan struct{})
	close(done)
	if err := b.AwaitReady(ctx, time.Hour, done); err == nil {
		t.Error("AwaitReady on a closed Driver = nil, want ErrClosed")
	}
	if err := b.AwaitReady(ctx, time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	if b.Ready() {
		t.Fatal("ready without a confirmation")
	}
	start := time.Now()
	if err := b.AwaitReady(ctx, time.Hour, nil); err != nil || time.Since(start) > 30*time.Second {
		t.Errorf("the next waiter waited %v (%v): want no wait once one went on", time.Since(start), err)
	}
}
