package redislock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Driver has one pub/sub connection, opened when a waiter first needs
// it. Two goroutines serve it until Close: the manager, the only one to
// send SUBSCRIBE and UNSUBSCRIBE (so they reach Redis in the order the
// Driver decided them), and the listener, which hands messages and
// subscription confirmations to the waiters.
//
// A subscription is held by the local waiters on its name while there are
// any, and unsubscribed when it empties; if another
// queue wants the channel before the manager got to it, it is reused. At
// most opts.maxSubs channels are subscribed at once; queues beyond the
// bound poll.

// subscription is the state of one lock channel. Guarded by Driver.mu.
type subscription struct {
	channel string
	name    string
	refs    int  // queues holding it: 0 or 1
	sent    bool // SUBSCRIBE sent and no UNSUBSCRIBE since
	pending int  // SUBSCRIBE confirmations still to come

	confirmed bool
	ready     chan struct{} // closed by the first confirmation
}

func (s *subscription) isReady() bool {
	select {
	case <-s.ready:
		return true
	default:
		return false
	}
}

type pubsubState struct {
	ps     *redis.PubSub
	kick   chan struct{}       // the manager has work; capacity 1
	dirty  map[string]struct{} // channels whose state changed; guarded by Driver.mu
	cancel context.CancelFunc  // ends the manager and its calls
	wg     sync.WaitGroup
}

// pubsubCallTimeout bounds one SUBSCRIBE or UNSUBSCRIBE by the manager.
const pubsubCallTimeout = 5 * time.Second

// resubscribeDelay is how long the manager waits before sending again
// SUBSCRIBEs that failed; their waiters poll meanwhile.
const resubscribeDelay = 200 * time.Millisecond

func (p *pubsubState) stop() {
	p.cancel()
	_ = p.ps.Close()
	p.wg.Wait()
}

// subscribeLocked gives q a subscription to its lock's channel, unless the
// Driver's bound is reached: q then polls. d.mu is held.
func (d *Driver) subscribeLocked(q *queue) {
	if q.sub != nil || d.isClosed() {
		return
	}
	s := d.subs[q.channel]
	if s == nil {
		if len(d.subs) >= d.opts.maxSubs {
			return
		}
		s = &subscription{channel: q.channel, name: q.name, ready: make(chan struct{})}
		d.subs[q.channel] = s
	}
	s.refs++
	q.sub = s
	d.startPubSubLocked()
	d.pokeLocked(s.channel)
}

// unsubscribeLocked drops q's subscription. d.mu is held.
func (d *Driver) unsubscribeLocked(q *queue) {
	s := q.sub
	if s == nil {
		return
	}
	q.sub = nil
	s.refs--
	if s.refs == 0 {
		d.pokeLocked(s.channel)
	}
}

func (d *Driver) pokeLocked(channel string) {
	d.ps.dirty[channel] = struct{}{}
	select {
	case d.ps.kick <- struct{}{}:
	default:
	}
}

func (d *Driver) startPubSubLocked() {
	if d.ps != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	ps := d.client.Subscribe(ctx) // no channel yet: no I/O
	p := &pubsubState{
		ps:     ps,
		kick:   make(chan struct{}, 1),
		dirty:  make(map[string]struct{}),
		cancel: cancel,
	}
	msgs := ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	p.wg.Add(2)
	go d.listen(p, msgs)
	go d.manage(ctx, p)
	d.ps = p
}

// manage sends the SUBSCRIBEs and UNSUBSCRIBEs that the subscriptions'
// state calls for, in the order of that state's changes.
func (d *Driver) manage(ctx context.Context, p *pubsubState) {
	defer p.wg.Done()
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-retry:
			retry = nil
		}
		sub, unsub := d.reconcile(p)
		cctx, cancel := context.WithTimeout(ctx, pubsubCallTimeout)
		if len(unsub) > 0 { // an empty list would mean "all"
			_ = p.ps.Unsubscribe(cctx, unsub...)
		}
		if len(sub) > 0 {
			if err := p.ps.Subscribe(cctx, sub...); err != nil && ctx.Err() == nil {
				// The confirmations may never come: take the channels
				// out of go-redis's set and send them again later.
				_ = p.ps.Unsubscribe(cctx, sub...)
				d.unsent(p, sub)
				retry = time.After(resubscribeDelay)
			}
		}
		cancel()
	}
}

// reconcile returns the channels to subscribe and to unsubscribe, and
// updates their state as if that had been done.
func (d *Driver) reconcile(p *pubsubState) (sub, unsub []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for ch := range p.dirty {
		delete(p.dirty, ch)
		s := d.subs[ch]
		switch {
		case s == nil:
		case s.refs > 0 && !s.sent:
			s.sent = true
			s.pending++
			sub = append(sub, ch)
		case s.refs == 0 && !s.sent:
			delete(d.subs, ch)
		case s.refs == 0 && s.pending == 0:
			// Only once confirmed: a confirmation still on its way could
			// otherwise be taken for that of a later SUBSCRIBE.
			delete(d.subs, ch)
			unsub = append(unsub, ch)
		}
	}
	return sub, unsub
}

// unsent marks the channels of a failed SUBSCRIBE as not subscribed, for
// the manager's next round.
func (d *Driver) unsent(p *pubsubState, channels []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ch := range channels {
		if s := d.subs[ch]; s != nil && s.sent {
			s.sent, s.pending = false, 0
			p.dirty[ch] = struct{}{}
		}
	}
}

// listen hands messages and confirmations to the waiters until the
// PubSub is closed.
func (d *Driver) listen(p *pubsubState, msgs <-chan any) {
	defer p.wg.Done()
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Message:
			d.onMessage(m.Channel, m.Payload)
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				d.onSubscribed(p, m.Channel)
			}
		}
	}
}

func (d *Driver) onSubscribed(p *pubsubState, channel string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.subs[channel]
	if s == nil {
		return
	}
	if s.pending == 0 {
		// go-redis reconnected and subscribed again: a grant published
		// while the connection was down is lost, so the waiters ask now.
		d.wakeAllLocked(s.name)
		return
	}
	s.pending--
	if s.pending > 0 {
		return
	}
	if !s.confirmed {
		s.confirmed = true
		close(s.ready)
	}
	if s.refs == 0 {
		d.pokeLocked(channel) // now it can be unsubscribed
	}
}
