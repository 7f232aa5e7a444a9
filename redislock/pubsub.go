package redislock

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

	"github.com/golocker/locker/internal/driverkit"
)

// A Driver has one pub/sub channel of its own, its inbox: the scripts
// that hand a lock to one of its waiters publish "<token> <owner>" there,
// so a grant reaches the one process that waits for it, and wakes no
// other. The Driver subscribes when a waiter first needs the inbox, or a
// hold could first have been passed to a waiter of its Client (Pass), and
// stays subscribed until Close: one SUBSCRIBE in the Driver's life, one
// subscription however many names it waits for. Two goroutines serve it:
// the subscriber, which sends SUBSCRIBE (again after a failure), and the
// listener, which hands grants to the waiters.

// inbox is the state of the Driver's inbox. Its fields do not change after
// startInboxLocked.
type inbox struct {
	ps     *redis.PubSub
	ready  chan struct{} // closed by the first confirmation of the SUBSCRIBE
	late   atomic.Bool   // a waiter gave up waiting for ready: the next ones do not wait
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (b *inbox) isReady() bool { return driverkit.Done(b.ready) }

// inboxCallTimeout bounds one SUBSCRIBE. After a failure, the next one
// is sent after resubscribeDelay, doubling up to maxResubscribeDelay (the
// waiters poll meanwhile).
const (
	inboxCallTimeout    = 5 * time.Second
	resubscribeDelay    = 200 * time.Millisecond
	maxResubscribeDelay = 30 * time.Second
)

// inboxChannel returns a new inbox channel name under prefix: 128 random
// bits, so two Drivers never share one.
func inboxChannel(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return prefix + "inbox:" + hex.EncodeToString(b[:])
}

// startInboxLocked subscribes the Driver to its inbox, once. d.mu is held.
func (d *Driver) startInboxLocked() *inbox {
	if d.inbox != nil {
		return d.inbox
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &inbox{
		ps:     d.client.Subscribe(ctx), // no channel yet: no I/O
		ready:  make(chan struct{}),
		cancel: cancel,
	}
	msgs := b.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	b.wg.Add(2)
	go d.subscribe(ctx, b)
	go d.listen(b, msgs)
	d.inbox = b
	return b
}

func (b *inbox) stop() {
	b.cancel()
	_ = b.ps.Close()
	b.wg.Wait()
}

// subscribe sends the SUBSCRIBE until Redis takes it or the Driver
// closes. Once taken, go-redis subscribes again by itself after a
// reconnect.
func (d *Driver) subscribe(ctx context.Context, b *inbox) {
	defer b.wg.Done()
	delay := resubscribeDelay
	for {
		cctx, cancel := context.WithTimeout(ctx, inboxCallTimeout)
		err := b.ps.Subscribe(cctx, d.inboxName)
		cancel()
		if err == nil || ctx.Err() != nil {
			return
		}
		// The confirmation may never come: take the channel out of
		// go-redis's set and send it again later.
		cctx, cancel = context.WithTimeout(ctx, inboxCallTimeout)
		_ = b.ps.Unsubscribe(cctx, d.inboxName)
		cancel()
		if !driverkit.Sleep(ctx, delay) {
			return
		}
		delay = min(2*delay, maxResubscribeDelay)
	}
}

// listen hands grants and confirmations to the waiters until the PubSub
// is closed.
func (d *Driver) listen(b *inbox, msgs <-chan any) {
	defer b.wg.Done()
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Message:
			d.onGrant(m.Payload)
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			if b.isReady() {
				// go-redis reconnected and subscribed again: a grant
				// published while the connection was down is lost, so
				// the waiters ask now.
				d.wakeAll()
				continue
			}
			close(b.ready)
		}
	}
}

// onGrant passes a grant, "<token> <owner>" or "<token>-<last> <owner>",
// to the waiter it names, if it still waits; "q <key>" says that another
// Driver's waiter queued behind the Driver's hold of key (chain.go).
func (d *Driver) onGrant(payload string) {
	if key, ok := strings.CutPrefix(payload, "q "); ok {
		d.onQueued(key)
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
	d.mu.Lock()
	defer d.mu.Unlock()
	if w := d.waiters[owner]; w != nil {
		// The newest grant wins: an older one still unread has lapsed.
		select {
		case <-w.grant:
		default:
		}
		w.grant <- grant{token, last}
	}
	// A grant to an owner that no longer waits: its waiter gave up, and
	// its leaving call releases it.
}

// wakeAll makes every waiter of the Driver call Redis now, and every
// chain pass no more (a message that another Driver's waiter queued may be
// lost too).
func (d *Driver) wakeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range d.waiters {
		w.poke()
	}
	for _, c := range d.chains {
		c.reconnected()
	}
}
