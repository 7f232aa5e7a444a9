package redislock

import (
	"context"
	"runtime"
	"slices"
	"time"

	"github.com/golocker/locker/backend"
)

// Passing. A Driver that holds a lock and has waiters of its own for it
// passes the lock from one of its holds to the next without a call to
// Redis: the releasing goroutine gives the oldest local waiter a lease at
// once. Redis still has the hold that began the run (a chain): its owner,
// its lease, which every hold of the chain renews, and its reserved
// fencing tokens. The chain ends, and the lock is released in Redis, when
// the next waiter may not be passed the lock; the Driver's waiters that
// waited only in the process then join the queue in Redis at the back,
// in their order, in the same script.
//
// A waiter of the Driver waits in the process only (a local waiter), with
// no place in Redis and no call, when it arrives while the Driver holds
// the lock in a chain that may pass it on, and every other waiter of the
// Driver for the name may be passed the lock too. Otherwise it queues in
// Redis as usual; its calls tell it whether only the Driver's own waiters
// are ahead of it there (mine), and only then may it be passed the lock.
//
// What keeps it as safe and as fair as a release:
//
//   - Tokens. A grant to a waiter whose Driver listens on an inbox
//     reserves BLOCK tokens (scripts/queue.lua), and the Driver reserves
//     more before they run out (reserve.lua). A passed hold takes the next
//     reserved token: above its predecessor's, below any token granted
//     after the chain, since nothing else takes tokens while it lasts.
//   - Order. Only the Driver's oldest waiter is passed the lock, and only
//     when no other process's waiter may be ahead of it: a waiter queued
//     in Redis with only the Driver's waiters ahead, or a local waiter that
//     arrived before any other process's waiter queued. A grant made while
//     another process's waiter is queued reserves no tokens, so that chain
//     passes nothing. The script that queues another process's waiter
//     behind a chain tells the chain's Driver (a "q <key>" message on its
//     inbox, once per grant), which then passes no more: that waiter is
//     served next. One that queued less than a message's delivery before a
//     local waiter arrived may be served after it. A pub/sub reconnect,
//     which may have lost such a message, ends every chain's passing.
//     With WithBatch, a chain may go on for batch passes that serve a
//     waiter before another Driver's (overtook counts them); it reserves
//     tokens itself when its grant reserved none, and passes only to local
//     waiters and to waiters whose place in Redis is known to exist.
//   - The lease. A passed hold's Start is when the chain's lease was last
//     set in Redis (its grant or last renewal), so package locker never
//     counts on more than Redis gives. The lock is passed only while that
//     is recent (less than a tenth of the TTL ago), and only between holds
//     with the same TTL.
//   - Failure. Every hold of a chain renews, and releases, as the chain's
//     owner, owner-checked. If the chain's hold in Redis is gone (forced
//     off, expired), a hold that was passed it finds itself lost at its
//     next renewal, when its predecessor would have; its token is below
//     that of whoever holds the lock since, so a fenced resource refuses
//     it. A local waiter of a chain that is found lost, or has not been
//     renewed for a TTL, queues in Redis.
//
// With WithWaitReplicas, nothing is passed: each grant is confirmed on
// the replicas.

// passBlock is how many tokens reserve.lua adds, when fewer than half of
// it are left; scripts/queue.lua's BLOCK is the same.
const passBlock = 64

// passFresh: the lock is passed only while its lease in Redis was set less
// than TTL/passFresh ago.
const passFresh = 10

// chain is a run of holds of one Driver on one name under one hold in
// Redis.
type chain struct {
	name   string
	key    string
	owner  string // the owner that Redis has: the first hold's
	ttl    time.Duration
	listen bool // granted with the Driver's inbox: told when another Driver's waiter queues

	// Guarded by the Driver's mu.
	cur       *lease    // the hold now; nil once the chain ended
	next      uint64    // the next reserved token
	last      uint64    // the last reserved token
	setAt     time.Time // when the lease in Redis was last set (send time)
	remote    bool      // another Driver's waiter is queued
	overtook  int       // passes made while another Driver's waiter may have waited longer (WithBatch)
	lost      bool      // a renewal found the hold in Redis gone
	reserving bool      // a reserve.lua call is on its way
	passed    []any     // owners passed the lock that had a place in Redis
}

// startChain makes l the first hold of a chain. listen tells whether the
// grant carried the Driver's inbox.
//
// A grant to a Driver that listens reserves no tokens only when another
// Driver's waiter was queued (scripts/queue.lua): that chain starts
// remote. With WithBatch, it reserves tokens before the hold begins, to
// pass the lock to up to batch waiters of its own before that one: a reply
// that lands during a hold would delay the holder's timers (the runtime's
// poller sleeps in whole milliseconds), a call before it only the grant.
func (d *Driver) startChain(l *lease, last uint64, listen bool) {
	c := &chain{
		name: l.name, key: l.key, owner: l.owner, ttl: l.ttl, listen: listen,
		cur: l, next: l.token + 1, last: max(last, l.token), setAt: l.start,
		remote: listen && last <= l.token,
	}
	l.c = c
	d.mu.Lock()
	if at, ok := d.early[c.name]; ok {
		delete(d.early, c.name)
		c.remote = c.remote || time.Since(at) < earlyQueued
	}
	d.chains[c.name] = c
	reserve := listen && d.opts.batch > 0 && d.startReserveLocked(c)
	d.mu.Unlock()
	if reserve {
		d.reserve(c)
	}
}

// startReserveLocked tells whether c needs more tokens and no reserve.lua
// call is on its way, and if so, marks one on its way. d.mu is held.
func (d *Driver) startReserveLocked(c *chain) bool {
	if c.reserving || c.next+passBlock/2 <= c.last || d.isClosed() {
		return false
	}
	c.reserving = true
	d.background.Add(1)
	return true
}

// passableLocked returns the waiter that c's hold may pass the lock to, or
// nil. d.mu is held.
func (d *Driver) passableLocked(c *chain) *waiter {
	if d.opts.waitReplicas > 0 || d.isClosed() || c.lost || c.next > c.last ||
		time.Since(c.setAt) >= c.ttl/passFresh {
		return nil
	}
	q := d.queues[c.name]
	if len(q) == 0 || q[0].ttl != c.ttl {
		return nil
	}
	w := q[0]
	if overtakes(c, w) && (c.overtook >= d.opts.batch || !w.local && !w.called) {
		// Another Driver's waiter may be first; WithBatch allows some
		// passes before it, to waiters with a place in Redis known to
		// exist (not one whose first call is on its way, whose place
		// could be made after the chain took it away).
		return nil
	}
	return w
}

// overtakes tells whether passing c's lock to w may serve w before a
// waiter of another Driver that waits longer.
func overtakes(c *chain, w *waiter) bool { return c.remote || !w.mine }

// mayWaitLocallyLocked tells whether a waiter for r may wait in the
// process only: the Driver holds the lock in a chain that listens and may
// pass it on, and every other waiter of the Driver for the name may be
// passed it. d.mu is held.
func (d *Driver) mayWaitLocallyLocked(r backend.Request) bool {
	c := d.chains[r.Name]
	if c == nil || c.cur == nil || !c.listen || d.opts.waitReplicas > 0 || c.lost ||
		c.next > c.last || c.ttl != r.TTL || time.Since(c.setAt) >= c.ttl/passFresh {
		return false
	}
	if c.overtook < d.opts.batch {
		// WithBatch: it may be passed the lock before another Driver's
		// waiter; if not, the chain's end queues it in Redis.
		return true
	}
	if c.remote {
		return false
	}
	for _, w := range d.queues[r.Name] {
		if !w.mine {
			return false
		}
	}
	return true
}

// releaseChain ends l's hold: it passes the lock to the next waiter of the
// Driver when it may, or else ends the chain, releasing it in Redis.
func (d *Driver) releaseChain(ctx context.Context, l *lease) error {
	c := l.c
	d.mu.Lock()
	if c.cur != l {
		d.mu.Unlock()
		return backend.ErrLost
	}
	if w := d.passableLocked(c); w != nil {
		to := &lease{d: d, c: c, name: c.name, key: c.key, owner: w.owner, ttl: c.ttl, token: c.next, start: c.setAt}
		c.next++
		if overtakes(c, w) {
			c.overtook++
		}
		c.cur = to
		if !w.local {
			c.passed = append(c.passed, w.owner)
			if w.calling > 0 {
				d.addStrayLocked(w, c)
			}
		}
		d.unregisterLocked(w)
		w.pass <- to // capacity 1, and w is passed the lock once
		reserve := d.startReserveLocked(c)
		d.mu.Unlock()
		if reserve {
			go d.reserve(c)
		}
		// w is ready to run on this goroutine's P, but would run only
		// once this goroutine blocks, after its whole return path; yield
		// so that the next holder starts now (hand-off gap 0.03 → 0.01 ms
		// in bench/).
		runtime.Gosched()
		return nil
	}
	c.cur = nil
	if d.chains[c.name] == c {
		delete(d.chains, c.name)
	}
	// The local waiters join the queue in Redis at the back, in order.
	var locals []*waiter
	var placing chan struct{}
	for _, w := range d.queues[c.name] {
		if w.local {
			if placing == nil {
				placing = make(chan struct{})
				defer close(placing)
			}
			w.local, w.mine, w.placing = false, true, placing
			locals = append(locals, w)
		}
	}
	args := append([]any{c.owner, "0", len(c.passed)}, c.passed...)
	for _, w := range locals {
		args = append(args, w.owner, ms(w.ttl), ms(placeWindow(w.ttl)), d.inboxName)
	}
	d.mu.Unlock()
	sent := time.Now()
	n, err := queueReleaseScript.Run(ctx, d.client, scriptKeys(c.key), args...).Int64()
	if err == nil && len(locals) > 0 {
		// Their places exist now.
		d.mu.Lock()
		for _, w := range locals {
			w.called = true
		}
		d.mu.Unlock()
	}
	for _, w := range locals {
		// Without an error they have their places (their first call can
		// wait a refresh); with one, they call at once.
		w.queued(placement{ok: err == nil, sent: sent})
	}
	if err != nil {
		return storeErr(err)
	}
	return ownerReply(n)
}

// reserve adds passBlock tokens to c's, if c's hold in Redis is still the
// chain's, and takes the waiters passed the lock so far out of the queue.
func (d *Driver) reserve(c *chain) {
	defer d.background.Done()
	d.mu.Lock()
	last := c.last
	drops := c.passed
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	args := append([]any{c.owner, last, passBlock}, drops...)
	top, err := reserveScript.Run(ctx, d.client, scriptKeys(c.key), args...).Int64()
	d.mu.Lock()
	defer d.mu.Unlock()
	c.reserving = false
	if err == nil {
		// Their places are gone.
		c.passed = c.passed[len(drops):]
	}
	if err == nil && top > 0 && c.last == last {
		c.last = uint64(top)
	}
}

// renewed records a renewal of c's lease in Redis sent at sent: ok, or
// found gone.
func (d *Driver) renewed(c *chain, sent time.Time, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !ok {
		d.chainLostLocked(c)
		return
	}
	if sent.After(c.setAt) {
		c.setAt = sent
	}
}

// chainLostLocked records that c's hold in Redis is gone: it passes no
// more, and the local waiters of its name, if it is the Driver's chain for
// the name, queue in Redis at once. d.mu is held.
func (d *Driver) chainLostLocked(c *chain) {
	c.lost = true
	if d.chains[c.name] != c {
		return
	}
	for _, w := range d.queues[c.name] {
		if w.local {
			w.local, w.mine = false, false
			w.queued(placement{})
		}
	}
}

// forcedOff records that name was freed by force.
func (d *Driver) forcedOff(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.chains[name]; c != nil {
		d.chainLostLocked(c)
	}
}

// chainAlive tells whether a local waiter for name may go on waiting in
// the process: the Driver holds the lock in a chain not found lost and
// renewed within its TTL.
func (d *Driver) chainAlive(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.chains[name]
	return c != nil && c.cur != nil && !c.lost && time.Since(c.setAt) < c.ttl
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
	if c := d.chains[name]; c != nil && c.cur != nil {
		c.remote = true
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

// localWaiters counts name's waiters that wait in the process only, and
// returns the owners that were passed the lock while they had a place in
// Redis: Waiters counts the first, not the second.
func (d *Driver) localWaiters(name string) (n int, passed []any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range d.queues[name] {
		if w.local {
			n++
		}
	}
	if c := d.chains[name]; c != nil {
		passed = append(passed, c.passed...)
	}
	return n, passed
}

// current replaces the owner and token of a hold that Redis has for a
// chain of the Driver by those of the chain's hold now: Redis has the
// chain's first hold.
func (d *Driver) current(h *backend.Hold) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.chains[h.Name]; c != nil && c.cur != nil && c.owner == h.Owner {
		h.Owner, h.Token = c.cur.owner, c.cur.token
	}
}

// strayGrantLocked handles a grant published to an owner that no longer
// waits. If a chain passed that owner the lock while it still had a place
// in Redis, Redis handed the lock to the leftover place: the chain's hold
// in Redis is gone (forced off or expired), so the chain is lost, and the
// grant, which nobody would use, is released at once rather than at the
// end of its lease. d.mu is held.
//
// A waiter passed the lock while a call of its own was on its way may get
// its place back from that call after the chain took it away (and
// forgot it): such owners are kept in d.strays for a while, and a grant
// to one of them is handled the same way.
func (d *Driver) strayGrantLocked(owner string) {
	for _, c := range d.chains {
		if slices.Contains(c.passed, any(owner)) {
			d.chainLostLocked(c)
			d.releaseStrayLocked(c.key, owner)
			return
		}
	}
	if s, ok := d.strays[owner]; ok {
		delete(d.strays, owner)
		if c := d.chains[s.name]; c != nil && c.cur != nil {
			// Redis had the lock free to grant: the chain's hold is gone.
			d.chainLostLocked(c)
		}
		d.releaseStrayLocked(s.key, owner)
	}
}

// releaseStrayLocked releases, in the background, the grant of key to
// owner, who does not wait for it. d.mu is held.
func (d *Driver) releaseStrayLocked(key, owner string) {
	if d.isClosed() {
		return
	}
	d.background.Add(1)
	go func() {
		defer d.background.Done()
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		_, _ = (&lease{d: d, key: key, owner: owner}).release(ctx, false)
	}()
}

// stray is a waiter that was passed the lock while a call of its own was
// on its way (strayGrantLocked).
type stray struct {
	name, key string
	at        time.Time
}

// strayKeep is how long a stray is kept: longer than a place lasts
// (placeWindow) after a call that was on its way when the lock was passed.
const strayKeep = 10 * time.Second

// addStrayLocked records w, passed the lock of c while it was calling.
// d.mu is held.
func (d *Driver) addStrayLocked(w *waiter, c *chain) {
	now := time.Now()
	for o, s := range d.strays {
		if now.Sub(s.at) >= strayKeep {
			delete(d.strays, o)
		}
	}
	d.strays[w.owner] = stray{name: c.name, key: c.key, at: now}
}
