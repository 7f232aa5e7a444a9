// Package chain keeps the chains of a redislock Driver: the holds in Redis
// that it passes from one of its holds to the next without freeing them
// (docs/decisions.md, D23). It does no I/O: the Driver does what its
// methods say.
package chain

import "time"

// A Chain is a hold in Redis that a Driver passes from one of its holds to
// the next without freeing it (backend.Passer: package locker asks, when a
// hold of its Client ends and the Client has a waiter for the name). Redis
// keeps the chain's first owner, its lease (which every hold of the chain
// renews) and a block of fencing tokens reserved for it; each passed hold
// takes the next reserved token. The type is a state machine driven by
// events — the grant, a pass, a "q" message, a pub/sub reconnect, a
// renewal, a reservation of tokens, the end — which a Set feeds it under
// its lock.
//
// Invariants, which chain_test.go checks after every event:
//
//   - cur, the token of the chain's current hold, is 0 once the chain
//     ended, and otherwise below next; next is at most last+1.
//   - A pass hands out next and increments it: tokens within a chain
//     strictly increase, and since nothing else takes tokens of the name
//     while the chain holds it, every token granted after the chain is
//     above them all.
//   - A pass happens only while the lease in Redis was set less than
//     ttl/passFresh ago, between holds of the chain's TTL, and while no
//     renewal found the hold gone (lost).
//   - Order. A grant made while another Driver's waiter was queued
//     reserves no tokens (the chain starts remote); a "q" message (another
//     Driver's waiter queued behind the chain) and a pub/sub reconnect
//     (which may have lost one) make it remote. A remote chain passes at
//     most batch times more (WithBatch; 0 by default), so a waiter of
//     another process is served after at most batch holds of this one.
type Chain struct {
	name, key string
	owner     string // the owner Redis has: the first hold's
	ttl       time.Duration
	listen    bool // granted with the Driver's inbox: told of other Drivers' waiters

	cur       uint64    // token of the hold now; 0 once the chain ended
	curOwner  string    // its owner, for Holds
	next      uint64    // the next reserved token
	last      uint64    // the last reserved token
	setAt     time.Time // when the lease in Redis was last set (send time)
	remote    bool      // another Driver's waiter is, or may be, queued
	overtook  int       // passes while remote (WithBatch)
	lost      bool      // a renewal found the hold in Redis gone
	reserving bool      // a reserve.lua call is on its way
}

// Block is how many tokens reserve.lua adds; a chain asks for more when
// fewer than half of it are left. queue.lua's BLOCK is the same.
const Block = 64

// passFresh: a chain passes only while its lease in Redis was set less than
// ttl/passFresh ago, so that package locker, which dates a passed hold from
// that moment, never counts on more than Redis gives.
const passFresh = 10

// newChain starts a chain at the grant of token to owner, with the tokens
// up to last reserved for it. remote tells that another Driver's waiter was
// queued at the grant (it reserved nothing then) or shortly before it (a
// "q" that came before the chain began).
func newChain(name, key, owner string, ttl time.Duration, listen bool, token, last uint64, setAt time.Time, remote bool) *Chain {
	return &Chain{
		name: name, key: key, owner: owner, ttl: ttl, listen: listen,
		cur: token, curOwner: owner, next: token + 1, last: max(last, token), setAt: setAt,
		remote: remote || listen && last <= token,
	}
}

// passable reports whether the hold now may be passed, at now, to a hold of
// lease ttl, with batch passes allowed ahead of another Driver's waiter.
func (c *Chain) passable(now time.Time, ttl time.Duration, batch int) bool {
	switch {
	case c.cur == 0, c.lost, c.next > c.last, ttl != c.ttl:
		return false
	case now.Sub(c.setAt) >= c.ttl/passFresh:
		return false
	case c.remote && c.overtook >= batch:
		return false
	}
	return true
}

// pass makes the next hold the chain's current one, for owner, and returns
// its token; reserve tells the Driver to call reserve.lua (a call not yet
// on its way, and fewer than half a block left). passable must have said
// yes.
func (c *Chain) pass(owner string) (token uint64, reserve bool) {
	token = c.next
	c.next++
	c.cur, c.curOwner = token, owner
	if c.remote {
		c.overtook++
	}
	return token, c.needsTokens()
}

// needsTokens reports whether to reserve more tokens now, and if so marks
// the call on its way.
func (c *Chain) needsTokens() bool {
	if c.reserving || c.cur == 0 || c.next+Block/2 <= c.last {
		return false
	}
	c.reserving = true
	return true
}

// reserved records the answer of a reserve.lua call sent when the last
// reserved token was prev: top is the new last token, 0 when refused.
func (c *Chain) reserved(prev, top uint64, err error) {
	c.reserving = false
	if err == nil && top > 0 && c.last == prev {
		c.last = top
	}
}

// queued records a "q": another Driver's waiter queued behind the chain.
func (c *Chain) queued() { c.remote = true }

// reconnected records a pub/sub reconnect: a "q" may have been lost.
func (c *Chain) reconnected() { c.remote = true }

// renewed records a renewal of the lease in Redis, sent at sent: extended
// (ok) or found gone.
func (c *Chain) renewed(sent time.Time, ok bool) {
	if !ok {
		c.lost = true
		return
	}
	if sent.After(c.setAt) {
		c.setAt = sent
	}
}

// forcedOff records that the lock was freed by force.
func (c *Chain) forcedOff() { c.lost = true }

// end records that the chain's hold in Redis is released.
func (c *Chain) end() { c.cur, c.curOwner = 0, "" }

// holds reports whether token is the chain's hold now.
func (c *Chain) holds(token uint64) bool { return c.cur != 0 && c.cur == token }
