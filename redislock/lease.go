package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/golocker/locker/backend"
)

// lease is one hold on a Driver's Redis: the first of a chain (granted by
// Redis) or a hold the chain was passed to.
type lease struct {
	d     *Driver
	c     *chain // its chain; nil when it cannot be passed on
	key   string
	owner string // this hold's owner; Redis has the chain's
	ttl   time.Duration
	token uint64
	start time.Time
	lost  *backend.LostSignal // set before the lease is returned when the Driver watches its keys
}

func (d *Driver) newLease(r backend.Request, key string) *lease {
	return &lease{d: d, key: key, owner: r.Owner, ttl: r.TTL, start: time.Now()}
}

func (l *lease) Token() uint64 { return l.token }

// Start is when the acquire request that was granted was sent, or, for a
// hold passed on by another hold of the Driver, when the chain's lease in
// Redis was last set.
func (l *lease) Start() time.Time { return l.start }

// Lost returns the signal that the Driver fires when Redis no longer has
// the hold (keyspace.go), or nil when the Driver does not watch its keys:
// the next renewal then finds a deleted key.
func (l *lease) Lost() *backend.LostSignal { return l.lost }

// redisOwner is the owner that Redis has for the hold: the chain's.
func (l *lease) redisOwner() string {
	if l.c != nil {
		return l.c.owner
	}
	return l.owner
}

// Renew implements backend.Lease with the owner-checked renew script.
func (l *lease) Renew(ctx context.Context, ttl time.Duration) error {
	sent := time.Now()
	n, err := renewScript.Run(ctx, l.d.client, []string{l.key}, l.redisOwner(), ms(ttl)).Int64()
	if err != nil {
		return l.d.storeErr(err)
	}
	if n == 0 || n == 1 {
		l.d.renewed(l, sent, n == 1)
	}
	return ownerReply(n)
}

// Pass implements backend.Passer: the hold goes to r.Owner with the chain's
// next reserved token when the chain says it may (chain.go); else nil, and
// package locker releases it.
func (l *lease) Pass(_ context.Context, r backend.Request) (backend.Lease, error) {
	d := l.d
	d.mu.Lock()
	c := l.c
	passing := !d.isClosed() && d.opts.waitReplicas == 0
	if c == nil && passing {
		// A waiter of the Client was there to be passed this hold, but
		// its grant started no chain: it was taken without the inbox,
		// which the Driver subscribes when a waiter first waits in
		// Redis, and a Client whose waiters only ever find the lock free
		// never has one there. Subscribe now, so that the next grant
		// reserves tokens and passes.
		d.startInboxLocked()
	}
	if c == nil || !passing || !c.holds(l.token) || !c.passable(time.Now(), r.TTL, d.opts.batch) {
		d.mu.Unlock()
		return nil, nil
	}
	token, reserve := c.pass(r.Owner)
	next := &lease{d: d, c: c, key: c.key, owner: r.Owner, ttl: c.ttl, token: token, start: c.setAt}
	if reserve {
		d.background.Add(1)
	}
	d.mu.Unlock()
	if d.watch != nil {
		d.watch.pass(l, next)
	}
	if reserve {
		go d.reserve(c)
	}
	return next, nil
}

// Release implements backend.Lease: the owner-checked release script frees
// the lock, handing it to the oldest waiter in Redis, if any. A hold of a
// chain releases as the chain's owner, if it is the chain's hold now.
func (l *lease) Release(ctx context.Context) error {
	if l.d.watch != nil {
		l.d.watch.unwatch(l)
	}
	if l.c != nil && !l.d.endChain(l) {
		return backend.ErrLost
	}
	n, err := (&lease{d: l.d, key: l.key, owner: l.redisOwner()}).release(ctx, false)
	if err != nil {
		return err
	}
	return ownerReply(n)
}

// release runs the release script for the owner; with leave, the owner
// also leaves the queue if it does not hold the lock.
func (l *lease) release(ctx context.Context, leave bool) (int64, error) {
	mode := "0"
	if leave {
		mode = "1"
	}
	n, err := queueReleaseScript.Run(ctx, l.d.client, scriptKeys(l.key), l.owner, mode).Int64()
	return n, l.d.storeErr(err)
}

// ownerReply maps the 1/0 of the owner-checked scripts to nil/ErrLost.
func ownerReply(n int64) error {
	switch n {
	case 1:
		return nil
	case 0:
		return backend.ErrLost
	}
	return fmt.Errorf("%w: %d", errReply, n)
}

// startChain makes l, granted by Redis for name, the first hold of a chain, with the
// tokens up to last reserved for it; listen tells whether the grant carried
// the Driver's inbox. A grant that can never be passed on starts none.
//
// A grant to a Driver that listens reserves no tokens only when another
// Driver's waiter was queued: that chain starts remote. With WithBatch, it
// reserves tokens before the hold begins, to pass the lock to up to batch
// holds of its own before that waiter: a reply that lands during a hold
// would delay the holder's timers (the runtime's poller sleeps in whole
// milliseconds), a call before it only the grant.
func (d *Driver) startChain(name string, l *lease, last uint64, listen bool) {
	if !listen || last <= l.token && d.opts.batch == 0 {
		// Nothing to pass with (no reserved tokens, none to come), and no
		// "q" to hear: no chain, and nothing kept for the hold.
		return
	}
	d.mu.Lock()
	early := false
	if at, ok := d.early[name]; ok {
		delete(d.early, name)
		early = time.Since(at) < earlyQueued
	}
	c := newChain(name, l.key, l.owner, l.ttl, listen, l.token, last, l.start, early)
	l.c = c
	d.chains[c.name] = c
	reserve := listen && d.opts.batch > 0 && !d.isClosed() && c.needsTokens()
	if reserve {
		d.background.Add(1)
	}
	d.mu.Unlock()
	if reserve {
		d.reserve(c)
	}
}

// endChain ends l's chain, if l is its hold now: the caller then releases
// it in Redis. It reports whether l was.
func (d *Driver) endChain(l *lease) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := l.c
	if !c.holds(l.token) {
		return false
	}
	c.end()
	if d.chains[c.name] == c {
		delete(d.chains, c.name)
	}
	return true
}

// reserve adds passBlock tokens to c's, if c's hold in Redis is still the
// chain's.
func (d *Driver) reserve(c *chain) {
	defer d.background.Done()
	d.mu.Lock()
	prev := c.last
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	top, err := reserveScript.Run(ctx, d.client, scriptKeys(c.key), c.owner, prev, passBlock).Int64()
	d.mu.Lock()
	c.reserved(prev, uint64(max(top, 0)), err)
	d.mu.Unlock()
}

// renewed records a renewal of l's hold, sent at sent: ok, or found gone.
func (d *Driver) renewed(l *lease, sent time.Time, ok bool) {
	if l.c == nil {
		return
	}
	d.mu.Lock()
	l.c.renewed(sent, ok)
	d.mu.Unlock()
}

// earlyQueued is how long a "q" that came before its chain began is kept
// for it: the grant's reply, or its message, is on its way then.
const earlyQueued = maxWait

// onQueued records that another Driver's waiter queued behind the chain of
// the lock key. The message can come before the chain begins: the join
// script that sends it may run just after the grant, whose reply (or
// message, handled by another goroutine) is still on its way. Lost, it
// would let the chain pass the lock on for as long as it lasts, ahead of
// that waiter (a test with 4 Drivers of 8 handles saw one Driver keep the
// lock for 1,700 turns), so it is kept for the next chain.
func (d *Driver) onQueued(key string) {
	name, ok := d.keys.name(key)
	if !ok {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.chains[name]; c != nil {
		c.queued()
		return
	}
	now := time.Now()
	for n, at := range d.early {
		if now.Sub(at) >= earlyQueued {
			delete(d.early, n)
		}
	}
	d.early[name] = now
}
