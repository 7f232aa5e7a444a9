// Package inbox is a redislock Driver's pub/sub channel of its own, its
// inbox, and the waiters it tells of their grants.
//
// The scripts that hand a lock to one of a Driver's waiters publish
// "<token> <owner>" (or "<token>-<last> <owner>", with the last token
// reserved for the Driver) on its inbox, so a grant reaches the one
// process that waits for it, and wakes no other; the script that queues
// another Driver's waiter behind a hold the Driver may pass on publishes
// "q <key>". The Driver subscribes when a waiter first needs the inbox, or
// a hold could first have been passed to a waiter of its Client, and stays
// subscribed until Close: one SUBSCRIBE in the Driver's life, one
// subscription however many names it waits for. Two goroutines serve it:
// the subscriber, which sends SUBSCRIBE (again after a failure), and the
// listener, which hands grants to the waiters.
package inbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// callTimeout bounds one SUBSCRIBE. After a failure, the next one is sent
// after resubscribeDelay, doubling up to maxResubscribeDelay (the waiters
// poll meanwhile).
const (
	callTimeout         = 5 * time.Second
	resubscribeDelay    = 200 * time.Millisecond
	maxResubscribeDelay = 30 * time.Second
)

// Inbox is a Driver's inbox. It is safe for concurrent use.
type Inbox struct {
	client      redis.UniversalClient
	channel     string
	queued      func(key string) // a "q <key>"
	reconnected func()           // a reconnect, once the waiters are woken

	mu      sync.Mutex
	sub     *subscription      // nil until Start
	closed  bool               // by Close: no Start after it
	waiters map[string]*Waiter // by owner
}

// subscription is the state of a started Inbox. Its fields do not change
// after Start.
type subscription struct {
	ps     *redis.PubSub
	ready  chan struct{} // closed by the first confirmation of the SUBSCRIBE
	late   atomic.Bool   // a waiter gave up waiting for ready: the next ones do not wait
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns the Inbox of a Driver on client whose keys start with
// prefix, not yet subscribed. Its channel is prefix + "inbox:" and 128
// random bits, so two Drivers never share one. queued is called with the
// key of a "q" message, reconnected after go-redis subscribed again.
func New(client redis.UniversalClient, prefix string, queued func(key string), reconnected func()) *Inbox {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return &Inbox{
		client:      client,
		channel:     prefix + "inbox:" + hex.EncodeToString(b[:]),
		queued:      queued,
		reconnected: reconnected,
		waiters:     make(map[string]*Waiter),
	}
}

// Channel is the inbox's channel: the scripts publish to it.
func (b *Inbox) Channel() string { return b.channel }

// Start subscribes the inbox, once, unless Close came first. It does no
// I/O itself.
func (b *Inbox) Start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.startLocked()
}

func (b *Inbox) startLocked() *subscription {
	if b.sub != nil || b.closed {
		return b.sub
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &subscription{
		ps:     b.client.Subscribe(ctx), // no channel yet: no I/O
		ready:  make(chan struct{}),
		cancel: cancel,
	}
	msgs := s.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	s.wg.Add(2)
	go b.subscribe(ctx, s)
	go b.listen(s, msgs)
	b.sub = s
	return s
}

// Ready reports whether the inbox's SUBSCRIBE is confirmed, and the inbox
// not closed.
func (b *Inbox) Ready() bool {
	b.mu.Lock()
	s, closed := b.sub, b.closed
	b.mu.Unlock()
	return !closed && s != nil && driverkit.Done(s.ready)
}

// AwaitReady waits, after Join, for the inbox's SUBSCRIBE to be confirmed,
// at most bound: if that passes, the waiter goes on without the inbox and
// polls, and so do the next ones, which do not wait, until it is
// confirmed. It returns ctx's error, or backend.ErrClosed when done is
// closed first.
func (b *Inbox) AwaitReady(ctx context.Context, bound time.Duration, done <-chan struct{}) error {
	b.mu.Lock()
	s := b.sub
	b.mu.Unlock()
	if s == nil || driverkit.Done(s.ready) || s.late.Load() {
		return nil
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-s.ready:
	case <-t.C:
		s.late.Store(true)
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return backend.ErrClosed
	}
	return nil
}

// Close ends the subscription and its goroutines; a Start after it does
// nothing.
func (b *Inbox) Close() {
	b.mu.Lock()
	b.closed = true
	s := b.sub
	b.mu.Unlock()
	if s == nil {
		return
	}
	s.cancel()
	_ = s.ps.Close()
	s.wg.Wait()
}

// subscribe sends the SUBSCRIBE until Redis takes it or the inbox
// closes. Once taken, go-redis subscribes again by itself after a
// reconnect.
func (b *Inbox) subscribe(ctx context.Context, s *subscription) {
	defer s.wg.Done()
	delay := resubscribeDelay
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := s.ps.Subscribe(cctx, b.channel)
		cancel()
		if err == nil || ctx.Err() != nil {
			return
		}
		// The confirmation may never come: take the channel out of
		// go-redis's set and send it again later.
		cctx, cancel = context.WithTimeout(ctx, callTimeout)
		_ = s.ps.Unsubscribe(cctx, b.channel)
		cancel()
		if !driverkit.Sleep(ctx, delay) {
			return
		}
		delay = min(2*delay, maxResubscribeDelay)
	}
}

// listen hands grants and confirmations to the waiters until the PubSub
// is closed.
func (b *Inbox) listen(s *subscription, msgs <-chan any) {
	defer s.wg.Done()
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Message:
			b.deliver(m.Payload)
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			if driverkit.Done(s.ready) {
				// go-redis reconnected and subscribed again: a message
				// published while the connection was down is lost, so
				// the waiters ask now.
				b.wakeAll()
				b.reconnected()
				continue
			}
			close(s.ready)
		}
	}
}

// deliver passes a grant, "<token> <owner>" or "<token>-<last> <owner>",
// to the waiter it names, if it still waits, and a "q <key>" to queued.
func (b *Inbox) deliver(payload string) {
	if key, ok := strings.CutPrefix(payload, "q "); ok {
		b.queued(key)
		return
	}
	tok, owner, _ := strings.Cut(payload, " ")
	first, end, ranged := strings.Cut(tok, "-")
	token, err := strconv.ParseUint(first, 10, 64)
	if err != nil {
		return
	}
	last := token
	if ranged {
		if last, err = strconv.ParseUint(end, 10, 64); err != nil {
			return
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w := b.waiters[owner]; w != nil {
		// The newest grant wins: an older one still unread has lapsed.
		select {
		case <-w.grant:
		default:
		}
		w.grant <- Grant{token, last}
	}
	// A grant to an owner that no longer waits: its waiter gave up, and
	// its leaving call releases it.
}

// wakeAll makes every waiter call Redis now.
func (b *Inbox) wakeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.waiters {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// Waiter is an owner waiting for a grant on the inbox.
type Waiter struct {
	owner string
	grant chan Grant    // capacity 1: the newest grant published to this owner
	wake  chan struct{} // capacity 1: pub/sub reconnected
}

// Grant is a hand-off published to a waiter: its token, and the last
// token reserved with it (the token itself when none).
type Grant struct{ Token, Last uint64 }

// Grants delivers the grants published to the waiter, the newest one.
func (w *Waiter) Grants() <-chan Grant { return w.grant }

// Wakes tells the waiter to call Redis now: the subscription was made
// again after a reconnect, and a grant may have been lost.
func (w *Waiter) Wakes() <-chan struct{} { return w.wake }

// Join registers a waiter for owner, starting the subscription if it is
// not yet. Leave ends it.
func (b *Inbox) Join(owner string) *Waiter {
	w := &Waiter{owner: owner, grant: make(chan Grant, 1), wake: make(chan struct{}, 1)}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiters[owner] = w
	b.startLocked()
	return w
}

// Leave stops grants from reaching w.
func (b *Inbox) Leave(w *Waiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiters[w.owner] == w {
		delete(b.waiters, w.owner)
	}
}
