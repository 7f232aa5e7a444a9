package redislock

import (
	"context"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/redislock/internal/chain"
	"github.com/golocker/locker/redislock/internal/keys"
	"github.com/golocker/locker/redislock/internal/keyspace"
	"github.com/golocker/locker/redislock/internal/scripts"
)

// lease is one hold on a Driver's Redis: the first of a chain (granted by
// Redis) or a hold the chain was passed to.
type lease struct {
	d     *Driver
	c     *chain.Chain // its chain; nil when it cannot be passed on
	key   string
	owner string // this hold's owner; Redis has the chain's
	ttl   time.Duration
	token uint64
	start time.Time
	lost  *backend.LostSignal // set before the lease is returned when the Driver watches its keys
}

var _ keyspace.Hold = (*lease)(nil)

func (d *Driver) newLease(r backend.Request, key string) *lease {
	return &lease{d: d, key: key, owner: r.Owner, ttl: r.TTL, start: time.Now()}
}

func (l *lease) Token() uint64 { return l.token }

// Start is when the acquire request that was granted was sent, or, for a
// hold passed on by another hold of the Driver, when the chain's lease in
// Redis was last set.
func (l *lease) Start() time.Time { return l.start }

// Lost returns the signal that the Driver fires when Redis no longer has
// the hold (package keyspace), or nil when the Driver does not watch its
// keys: the next renewal then finds a deleted key.
func (l *lease) Lost() *backend.LostSignal { return l.lost }

// RedisOwner is the owner that Redis has for the hold: the chain's.
func (l *lease) RedisOwner() string {
	if l.c != nil {
		return l.c.Owner()
	}
	return l.owner
}

// Renew implements backend.Lease with the owner-checked renew script.
func (l *lease) Renew(ctx context.Context, ttl time.Duration) error {
	sent := time.Now()
	n, err := scripts.Renew.Run(ctx, l.d.client, []string{l.key}, l.RedisOwner(), scripts.MS(ttl)).Int64()
	if err != nil {
		return l.d.storeErr(err)
	}
	if n == 0 || n == 1 {
		l.d.chains.Renewed(l.c, sent, n == 1)
	}
	return scripts.OwnerReply(n)
}

// Pass implements backend.Passer: the hold goes to r.Owner with the chain's
// next reserved token when the chain says it may (package chain); else
// nil, and package locker releases it.
func (l *lease) Pass(_ context.Context, r backend.Request) (backend.Lease, error) {
	d := l.d
	if d.isClosed() || d.opts.WaitReplicas > 0 {
		return nil, nil
	}
	if l.c == nil {
		// A waiter of the Client was there to be passed this hold, but
		// its grant started no chain: it was taken without the inbox,
		// which the Driver subscribes when a waiter first waits in
		// Redis, and a Client whose waiters only ever find the lock free
		// never has one there. Subscribe now, so that the next grant
		// reserves tokens and passes.
		d.inbox.Start()
		return nil, nil
	}
	p, reserve, ok := d.chains.Pass(l.c, l.token, r.Owner, time.Now(), r.TTL, d.opts.Batch)
	if !ok {
		return nil, nil
	}
	next := &lease{d: d, c: l.c, key: l.key, owner: r.Owner, ttl: p.TTL, token: p.Token, start: p.SetAt}
	if d.watch != nil {
		next.lost = backend.NewLostSignal()
		d.watch.Pass(l.key, l, next)
	}
	if reserve && d.start(&d.background) {
		go d.reserve(l.c)
	}
	return next, nil
}

// Release implements backend.Lease: the owner-checked release script frees
// the lock, handing it to the oldest waiter in Redis, if any. A hold of a
// chain releases as the chain's owner, if it is the chain's hold now.
func (l *lease) Release(ctx context.Context) error {
	if l.d.watch != nil {
		l.d.watch.Unwatch(l.key, l)
	}
	if l.c != nil && !l.d.chains.End(l.c, l.token) {
		return backend.ErrLost
	}
	n, err := (&lease{d: l.d, key: l.key, owner: l.RedisOwner()}).release(ctx, false)
	if err != nil {
		return err
	}
	return scripts.OwnerReply(n)
}

// release runs the release script for the owner; with leave, the owner
// also leaves the queue if it does not hold the lock.
func (l *lease) release(ctx context.Context, leave bool) (int64, error) {
	mode := "0"
	if leave {
		mode = "1"
	}
	n, err := scripts.QueueRelease.Run(ctx, l.d.client, keys.Queued(l.key), l.owner, mode).Int64()
	return n, l.d.storeErr(err)
}

// startChain makes l, granted by Redis for name, the first hold of a chain
// (package chain), with the tokens up to last reserved for it; listen
// tells whether the grant carried the Driver's inbox. With WithBatch, a
// chain whose grant reserved nothing reserves tokens before the hold
// begins.
func (d *Driver) startChain(name string, l *lease, last uint64, listen bool) {
	c, reserve := d.chains.Start(chain.Grant{
		Name: name, Key: l.key, Owner: l.owner, TTL: l.ttl,
		Token: l.token, Last: last, SetAt: l.start, Listen: listen,
	}, d.opts.Batch)
	l.c = c
	if reserve && d.start(&d.background) {
		d.reserve(c)
	}
}

// reserve adds chain.Block tokens to c's, if c's hold in Redis is still
// the chain's. It ends a background call.
func (d *Driver) reserve(c *chain.Chain) {
	defer d.background.Done()
	prev := d.chains.Reserving(c)
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	top, err := scripts.Reserve.Run(ctx, d.client, keys.Queued(c.Key()), c.Owner(), prev, chain.Block).Int64()
	d.chains.Reserved(c, prev, uint64(max(top, 0)), err)
}

// earlyQueued is how long a "q" that came before its chain began is kept
// for it: the grant's reply, or its message, is on its way then.
const earlyQueued = maxWait

// onQueued records that another Driver's waiter queued behind the chain of
// the lock key (a "q" on the inbox).
func (d *Driver) onQueued(key string) {
	if name, ok := d.keys.Name(key); ok {
		d.chains.Queued(name)
	}
}

// goneInRedis stops the chain of h, a hold that Redis no longer has, from
// passing it on.
func (d *Driver) goneInRedis(h keyspace.Hold) { d.chains.Lost(h.(*lease).c) }
