package chain

import (
	"sync"
	"time"
)

// Set is a Driver's chains, by lock name, and the "q" messages that came
// before their chain began. Its lock guards every chain's state: a Chain
// changes only through the Set's methods. It is safe for concurrent use.
type Set struct {
	early time.Duration // how long a "q" is kept for a chain to come

	mu     sync.Mutex
	chains map[string]*Chain    // by name: the holds the Driver may pass on
	queued map[string]time.Time // by name: when a "q" came before its chain began
}

// NewSet returns an empty Set that keeps a "q" for early, the time in
// which the grant's reply, or message, that starts its chain is on its way
// (the Driver's longest wait between two calls).
func NewSet(early time.Duration) *Set {
	return &Set{early: early, chains: make(map[string]*Chain), queued: make(map[string]time.Time)}
}

// Grant is a hold that Redis granted: what may start a chain.
type Grant struct {
	Name, Key, Owner string
	TTL              time.Duration
	Token            uint64    // the hold's
	Last             uint64    // the last token reserved with the grant
	SetAt            time.Time // when the lease in Redis was set (send time)
	Listen           bool      // granted with the Driver's inbox
}

// Start makes g the first hold of a chain and returns it, or nil when g can
// never be passed on: granted without the Driver's inbox, which would not
// hear of other Drivers' waiters, or with no token reserved and none to
// come (batch 0). reserve tells the caller to call reserve.lua now, before
// the hold begins: with batch > 0, a chain whose grant reserved nothing
// (another Driver's waiter was queued) reserves for itself, to pass the
// lock to up to batch holds of its own before that waiter. (A reply that
// lands during a hold would delay the holder's timers, the runtime's
// poller sleeping in whole milliseconds; a call before it delays only the
// grant.)
func (s *Set) Start(g Grant, batch int) (c *Chain, reserve bool) {
	if !g.Listen || g.Last <= g.Token && batch == 0 {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	early := false
	if at, ok := s.queued[g.Name]; ok {
		delete(s.queued, g.Name)
		early = time.Since(at) < s.early
	}
	c = newChain(g.Name, g.Key, g.Owner, g.TTL, g.Listen, g.Token, g.Last, g.SetAt, early)
	s.chains[c.name] = c
	return c, batch > 0 && c.needsTokens()
}

// Key is the lock key of c's hold in Redis.
func (c *Chain) Key() string { return c.key }

// Owner is the owner that Redis has for c's hold: its first hold's.
func (c *Chain) Owner() string { return c.owner }

// Pass is a hold that a chain was passed to.
type Pass struct {
	Token uint64
	TTL   time.Duration
	SetAt time.Time // when the lease in Redis was last set
}

// Pass passes c's hold of token, at now, to owner, whose hold has lease
// ttl, if c may (batch passes are allowed ahead of another Driver's
// waiter); ok is false when it may not. reserve tells the caller to call
// reserve.lua.
func (s *Set) Pass(c *Chain, token uint64, owner string, now time.Time, ttl time.Duration, batch int) (p Pass, reserve, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !c.holds(token) || !c.passable(now, ttl, batch) {
		return Pass{}, false, false
	}
	next, reserve := c.pass(owner)
	return Pass{Token: next, TTL: c.ttl, SetAt: c.setAt}, reserve, true
}

// End ends c if token is its hold now, and reports whether it was: the
// caller then releases the hold in Redis.
func (s *Set) End(c *Chain, token uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !c.holds(token) {
		return false
	}
	c.end()
	if s.chains[c.name] == c {
		delete(s.chains, c.name)
	}
	return true
}

// Reserving returns the last token reserved for c, for the reserve.lua
// call that the caller sends now.
func (s *Set) Reserving(c *Chain) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.last
}

// Reserved records the answer of the reserve.lua call for c sent when its
// last reserved token was prev: top is the new last token, 0 when refused.
func (s *Set) Reserved(c *Chain, prev, top uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.reserved(prev, top, err)
}

// Renewed records a renewal of c's lease in Redis, sent at sent: extended
// (ok) or found gone. c may be nil: a hold of no chain.
func (s *Set) Renewed(c *Chain, sent time.Time, ok bool) {
	if c == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c.renewed(sent, ok)
}

// Lost records that Redis no longer has c's hold (nil c: none).
func (s *Set) Lost(c *Chain) {
	if c == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c.forcedOff()
}

// ForcedOff records that the lock name was freed by force.
func (s *Set) ForcedOff(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.chains[name]; c != nil {
		c.forcedOff()
	}
}

// Queued records that another Driver's waiter queued behind the chain of
// name. The message can come before the chain begins: the join script
// that sends it may run just after the grant, whose reply (or message,
// handled by another goroutine) is still on its way. Lost, it would let
// the chain pass the lock on for as long as it lasts, ahead of that waiter
// (a test with 4 Drivers of 8 handles saw one Driver keep the lock for
// 1,700 turns), so it is kept for the next chain, for the Set's early.
func (s *Set) Queued(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.chains[name]; c != nil {
		c.queued()
		return
	}
	now := time.Now()
	for n, at := range s.queued {
		if now.Sub(at) >= s.early {
			delete(s.queued, n)
		}
	}
	s.queued[name] = now
}

// Reconnected records a reconnect of the Driver's pub/sub connection: a
// "q" may have been lost, so no chain passes any more.
func (s *Set) Reconnected() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.chains {
		c.reconnected()
	}
}

// State is what a Set knows of the chain of a name now.
type State struct {
	Owner  string // the owner Redis has: the chain's first hold's
	Holder string // the owner of the chain's hold now
	Token  uint64 // its token
	Left   int    // the reserved tokens left to pass
	Remote bool   // another Driver's waiter is, or may be, queued
}

// State returns the state of name's chain, or false when it has none, or
// one that ended.
func (s *Set) State(name string) (State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chains[name]
	if c == nil || c.cur == 0 {
		return State{}, false
	}
	st := State{Owner: c.owner, Holder: c.curOwner, Token: c.cur, Remote: c.remote}
	if c.next <= c.last {
		st.Left = int(c.last - c.next + 1)
	}
	return st, true
}
