// Package casdriver is an example golocker driver, written the way a driver
// for a store we do not ship would be: a key-value store that offers only
// get, compare-and-swap and an atomic counter, with expiry timestamps kept
// in the value. Acquire is one compare-and-swap (package locker does the
// waiting), and it renews and releases with a compare-and-swap on the owner, and fences with the
// store-wide counter, so a record can be deleted on release and tokens
// still grow.
//
// It uses the standard library and golocker's public packages only, as a
// driver in another module must (Register opens URLs).
// docs/writing-a-driver.md walks through it; casdriver_test.go runs the
// conformance suite against it.
package casdriver

import (
	"context"
	"sync"
	"time"

	"github.com/golocker/locker/backend"
)

// Record is what the store keeps under a held lock's name.
type Record struct {
	Owner   string // "" when free
	Expires time.Time
	Fence   uint64
}

// Store is the toy remote store: Get and CompareAndSwap on whole records,
// and a counter.
type Store struct {
	mu      sync.Mutex
	m       map[string]Record
	counter uint64
}

// NewStore returns an empty Store.
func NewStore() *Store { return &Store{m: make(map[string]Record)} }

// Get returns the record of key (the zero Record when absent).
func (s *Store) Get(key string) Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key]
}

// CompareAndSwap stores next if the current record equals old; a zero next
// deletes the record.
func (s *Store) CompareAndSwap(key string, old, next Record) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.m[key]
	if !cur.Expires.Equal(old.Expires) || cur.Owner != old.Owner || cur.Fence != old.Fence {
		return false
	}
	if next == (Record{}) {
		delete(s.m, key)
	} else {
		s.m[key] = next
	}
	return true
}

// Incr increments the store's counter and returns its new value.
func (s *Store) Incr() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counter++
	return s.counter
}

// Len returns how many records the store keeps.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// Driver implements backend.Driver on a Store.
type Driver struct {
	s      *Store
	prefix string // of every record's key (key_prefix)
}

// New returns a Driver on s.
func New(s *Store) *Driver { return &Driver{s: s} }

// Capabilities: fencing and expiry; waiting is package locker's (attempts
// with back-off bounded by the holder's lease), and loss is found by
// renewal.
func (d *Driver) Capabilities() backend.Capabilities {
	return backend.Capabilities{Fencing: true, Expiry: true, CrossProcess: true}
}

// Close implements backend.Driver.
func (d *Driver) Close() error { return nil }

// Acquire implements backend.Driver: one compare-and-swap. When the lock is
// held it says how long the holder's lease has left, so that a waiter does
// not poll sooner than it must.
func (d *Driver) Acquire(_ context.Context, r backend.Request) (backend.Lease, error) {
	now := time.Now()
	key := d.prefix + r.Name
	old := d.s.Get(key)
	if old.Owner != "" && now.Before(old.Expires) {
		return nil, &backend.HeldError{Left: old.Expires.Sub(now), Owner: old.Owner, Token: old.Fence}
	}
	// A token taken by a failed swap is never used; tokens need only grow.
	next := Record{Owner: r.Owner, Expires: now.Add(r.TTL), Fence: d.s.Incr()}
	if !d.s.CompareAndSwap(key, old, next) {
		return nil, backend.ErrHeld // someone else's swap won
	}
	return &lease{d: d, key: key, owner: r.Owner, token: next.Fence, start: now}, nil
}

type lease struct {
	d          *Driver
	key, owner string
	token      uint64
	start      time.Time
}

func (l *lease) Token() uint64             { return l.token }
func (l *lease) Start() time.Time          { return l.start }
func (l *lease) Lost() *backend.LostSignal { return nil }
func (l *lease) mine(r Record, now time.Time) bool {
	return r.Owner == l.owner && now.Before(r.Expires)
}

func (l *lease) Renew(_ context.Context, ttl time.Duration) error {
	now := time.Now()
	old := l.d.s.Get(l.key)
	if !l.mine(old, now) {
		return backend.ErrLost
	}
	next := old
	next.Expires = now.Add(ttl)
	if !l.d.s.CompareAndSwap(l.key, old, next) {
		return backend.ErrLost
	}
	return nil
}

func (l *lease) Release(context.Context) error {
	old := l.d.s.Get(l.key)
	if !l.mine(old, time.Now()) {
		return backend.ErrLost
	}
	if !l.d.s.CompareAndSwap(l.key, old, Record{}) {
		return backend.ErrLost
	}
	return nil
}
