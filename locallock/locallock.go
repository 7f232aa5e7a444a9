package locallock

import (
	"container/list"
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// Scheme is the URL scheme of the in-process driver.
const Scheme = "mem"

func init() { locker.Register(Scheme, open) }

// namespaces are the Stores behind mem:// URLs; a namespace lives as long as
// the process, which is what sharing it between Opens means.
var namespaces struct {
	mu sync.Mutex
	m  map[string]*Store
}

func open(_ context.Context, u *url.URL) (backend.Driver, error) {
	if u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.User != nil || u.Port() != "" {
		return nil, fmt.Errorf("%w: want mem:// or mem://NAME", backend.ErrBadURL)
	}
	if u.Fragment != "" || strings.HasSuffix(u.String(), "#") {
		return nil, fmt.Errorf("%w: mem:// takes no fragment", backend.ErrBadURL)
	}
	if u.RawQuery != "" {
		return nil, fmt.Errorf("%w: mem:// takes no query parameters, got %q", backend.ErrBadURL, u.RawQuery)
	}
	ns := strings.ToLower(u.Host)
	namespaces.mu.Lock()
	defer namespaces.mu.Unlock()
	s := namespaces.m[ns]
	if s == nil {
		if namespaces.m == nil {
			namespaces.m = make(map[string]*Store)
		}
		s = NewStore()
		namespaces.m[ns] = s
	}
	return New(s), nil
}

// Store is an in-process lock table: the "server" that Drivers connect to.
// Drivers on the same Store see each other's locks, as clients of one
// remote store would.
type Store struct {
	mu       sync.Mutex
	names    map[string]*entry // the mutexes
	weighted map[wkey]*wentry  // the semaphores, read-write locks and elections
	watchers map[wkey]map[chan struct{}]struct{}
	fence    uint64 // last token granted, for every name
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{names: make(map[string]*entry), weighted: make(map[wkey]*wentry), watchers: make(map[wkey]map[chan struct{}]struct{})}
}

// entry is the state of one name that is held or waited for.
type entry struct {
	name    string
	holder  *lease
	waiters list.List // of *waiter, in arrival order
}

type waiter struct {
	req     backend.Request
	ch      chan *lease // buffered: the grant is handed over without blocking
	granted bool
	elem    *list.Element
}

// Driver is a connection to a Store. It implements backend.Driver,
// backend.Waiter, backend.Inspector and backend.QueueInspector.
type Driver struct {
	s    *Store
	life *driverkit.Life
}

// New returns a Driver on s, or on a new private Store when s is nil.
func New(s *Store) *Driver {
	if s == nil {
		s = NewStore()
	}
	return &Driver{s: s, life: driverkit.NewLife()}
}

// Capabilities implements backend.Driver.
func (d *Driver) Capabilities() backend.Capabilities {
	return backend.Capabilities{
		Fencing:    true,
		Notify:     true,
		FIFO:       true,
		LostSignal: true,
		Expiry:     true,
		Weighted:   true,
	}
}

// Close ends the Driver's waits in flight with ErrClosed. Holds stay in the
// Store until released or expired, as on a remote store.
func (d *Driver) Close() error { return d.life.Close(nil) }

func (d *Driver) check(ctx context.Context) error {
	if err := d.life.Err(); err != nil {
		return err
	}
	return ctx.Err()
}

// Acquire implements backend.Driver.
func (d *Driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if r.Kind != backend.Mutex {
		return d.acquireWeighted(ctx, r)
	}
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(r.Name)
	if e.holder == nil && e.waiters.Len() == 0 {
		return s.grant(e, r), nil
	}
	defer s.freeIfIdle(e)
	if h := e.holder; h != nil {
		return nil, &backend.HeldError{Owner: h.owner, Token: h.token, Left: time.Until(h.expires)}
	}
	return nil, backend.ErrHeld
}

// AcquireWait implements backend.Waiter: the waiter queues in the Store and
// the release hands it the lock.
func (d *Driver) AcquireWait(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if r.Kind != backend.Mutex {
		return d.acquireWaitWeighted(ctx, r)
	}
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	e := s.entry(r.Name)
	if e.holder == nil && e.waiters.Len() == 0 {
		l := s.grant(e, r)
		s.mu.Unlock()
		return l, nil
	}
	w := &waiter{req: r, ch: make(chan *lease, 1)}
	w.elem = e.waiters.PushBack(w)
	s.mu.Unlock()

	var err error
	select {
	case l := <-w.ch:
		return l, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-d.life.Done():
		err = backend.ErrClosed
	}
	s.mu.Lock()
	if !w.granted {
		e.waiters.Remove(w.elem)
		s.freeIfIdle(e)
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	// Granted as we gave up: hand it on rather than leak it.
	l := <-w.ch
	_ = l.Release(context.WithoutCancel(ctx))
	return nil, err
}

// entry returns the state of name, made if needed. s.mu is held.
func (s *Store) entry(name string) *entry {
	e := s.names[name]
	if e == nil {
		e = &entry{name: name}
		s.names[name] = e
	}
	return e
}

// grant makes r the holder of e. s.mu is held.
func (s *Store) grant(e *entry, r backend.Request) *lease {
	s.fence++
	now := time.Now()
	l := &lease{
		s:       s,
		e:       e,
		owner:   r.Owner,
		token:   s.fence,
		start:   now,
		expires: now.Add(r.TTL),
		lost:    backend.NewLostSignal(),
	}
	e.holder = l
	l.timer = time.AfterFunc(r.TTL, l.expire)
	return l
}

// vacate ends e's current hold and hands the lock to the first waiter, or
// frees e. s.mu is held.
func (s *Store) vacate(e *entry) {
	e.holder.timer.Stop()
	e.holder = nil
	if front := e.waiters.Front(); front != nil {
		w := e.waiters.Remove(front).(*waiter)
		w.granted = true
		w.ch <- s.grant(e, w.req)
		return
	}
	s.freeIfIdle(e)
}

// freeIfIdle drops the state of a name nobody holds or waits for. s.mu is
// held.
func (s *Store) freeIfIdle(e *entry) {
	if e.holder == nil && e.waiters.Len() == 0 && s.names[e.name] == e {
		delete(s.names, e.name)
	}
}

// Len returns how many names have state in the Store: held or waited for,
// of every kind.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.names) + len(s.weighted)
}
