package locallock

import (
	"container/list"
	"context"
	"fmt"
	"time"

	"github.com/golocker/locker/backend"
)

// The weighted kinds (Semaphore, RWMutex): a name's holds take units of
// its limit, and its queue grants in arrival order as many as fit (the rule
// of backend.Kind). A queue entry is a waiter of AcquireWait, handed its
// lease by the release that makes it fit, or the place of a polled wait
// (Request.Queue), which its owner's next attempt takes once nothing is
// queued before it.

// wkey names a weighted lock: its kind and name.
type wkey struct {
	kind backend.Kind
	name string
}

// wentry is the state of one weighted name that is held or waited for.
type wentry struct {
	key   wkey
	limit int64
	used  int64                // the units its holds take
	holds map[*wlease]struct{} // its holds
	queue list.List            // of *wwaiter, in arrival order
}

// wwaiter is an entry of a wentry's queue.
type wwaiter struct {
	req  backend.Request
	elem *list.Element

	// A waiter of AcquireWait: ch (buffered) receives its lease, granted
	// is set when it is sent.
	ch      chan *wlease
	granted bool

	// A place of a polled wait: it lapses at deadline; timer wakes the
	// queue then.
	place    bool
	deadline time.Time
	timer    *time.Timer
}

// wentryFor returns the state of r's name, made if needed, or an error
// wrapping ErrLimitConflict when the name is in use with another limit.
// s.mu is held.
func (s *Store) wentryFor(r backend.Request) (*wentry, error) {
	k := wkey{r.Kind, r.Name}
	e := s.weighted[k]
	if e == nil {
		e = &wentry{key: k, limit: r.Limit, holds: make(map[*wlease]struct{})}
		s.weighted[k] = e
		return e, nil
	}
	if e.limit != r.Limit {
		return nil, fmt.Errorf("%w: %s %q has a limit of %d, the request %d", backend.ErrLimitConflict, r.Kind, r.Name, e.limit, r.Limit)
	}
	return e, nil
}

// checkWeighted checks a weighted request's units.
func checkWeighted(r backend.Request) error {
	if r.Limit < 1 || r.Limit > backend.MaxLimit || r.Weight < 1 || r.Weight > r.Limit {
		return fmt.Errorf("%w: weight %d of limit %d", backend.ErrInvalidOption, r.Weight, r.Limit)
	}
	return nil
}

// acquireWeighted makes one attempt for a weighted request: granted when
// nothing is queued before r.Owner's place (or at all, without one) and
// r.Weight fits. With r.Queue, an attempt that is not granted keeps r.Owner's
// place.
func (d *Driver) acquireWeighted(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if err := checkWeighted(r); err != nil {
		return nil, err
	}
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.wentryFor(r)
	if err != nil {
		return nil, err
	}
	s.lapse(e, time.Now())
	var mine *wwaiter
	ahead := false
	for el := e.queue.Front(); el != nil; el = el.Next() {
		w := el.Value.(*wwaiter)
		if w.place && w.req.Owner == r.Owner {
			mine = w
			break
		}
		ahead = true
	}
	if !ahead && e.used+r.Weight <= e.limit {
		if mine != nil {
			s.unqueue(e, mine)
		}
		return s.grantWeighted(e, r), nil
	}
	if r.Queue {
		if mine == nil {
			mine = &wwaiter{req: r, place: true}
			mine.elem = e.queue.PushBack(mine)
		}
		mine.deadline = time.Now().Add(r.TTL)
		if mine.timer == nil {
			mine.timer = time.AfterFunc(r.TTL, func() { s.wake(e) })
		} else {
			mine.timer.Reset(r.TTL)
		}
	}
	defer s.freeWeightedIfIdle(e)
	return nil, s.heldError(e)
}

// heldError describes who holds e: the holder whose lease ends last.
// s.mu is held.
func (s *Store) heldError(e *wentry) error {
	var last *wlease
	for l := range e.holds {
		if last == nil || l.expires.After(last.expires) {
			last = l
		}
	}
	if last == nil {
		return backend.ErrHeld
	}
	he := &backend.HeldError{Left: time.Until(last.expires)}
	if len(e.holds) == 1 {
		he.Owner, he.Token = last.owner, last.token
	}
	return he
}

// acquireWaitWeighted waits in the queue of r's name until a release makes
// r fit, or ctx ends.
func (d *Driver) acquireWaitWeighted(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if err := checkWeighted(r); err != nil {
		return nil, err
	}
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	e, err := s.wentryFor(r)
	if err != nil {
		s.freeWeightedIfIdle(e)
		s.mu.Unlock()
		return nil, err
	}
	w := &wwaiter{req: r, ch: make(chan *wlease, 1)}
	w.elem = e.queue.PushBack(w)
	s.process(e)
	s.mu.Unlock()

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
		s.unqueue(e, w)
		s.process(e)
		s.freeWeightedIfIdle(e)
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	// Granted as we gave up: give it back rather than leak it.
	l := <-w.ch
	_ = l.Release(context.WithoutCancel(ctx))
	return nil, err
}

// Dequeue implements backend.Dequeuer: it removes r.Owner's place.
func (d *Driver) Dequeue(_ context.Context, r backend.Request) error {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.weighted[wkey{r.Kind, r.Name}]
	if e == nil {
		return nil
	}
	for el := e.queue.Front(); el != nil; el = el.Next() {
		if w := el.Value.(*wwaiter); w.place && w.req.Owner == r.Owner {
			s.unqueue(e, w)
			break
		}
	}
	s.process(e)
	s.freeWeightedIfIdle(e)
	return nil
}

// unqueue takes w off e's queue. s.mu is held.
func (s *Store) unqueue(e *wentry, w *wwaiter) {
	e.queue.Remove(w.elem)
	if w.timer != nil {
		w.timer.Stop()
	}
}

// lapse takes the places that lapsed by now off e's queue. s.mu is held.
func (s *Store) lapse(e *wentry, now time.Time) {
	for el := e.queue.Front(); el != nil; {
		next := el.Next()
		if w := el.Value.(*wwaiter); w.place && now.After(w.deadline) {
			s.unqueue(e, w)
		}
		el = next
	}
}

// wake runs the grants of e's queue when a place lapses.
func (s *Store) wake(e *wentry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.weighted[e.key] != e {
		return
	}
	s.process(e)
	s.freeWeightedIfIdle(e)
}

// process grants, in order, the waiters at the front of e's queue that fit;
// it stops at the first that does not, or at a place, which only its
// owner's attempt takes. s.mu is held.
func (s *Store) process(e *wentry) {
	s.lapse(e, time.Now())
	for el := e.queue.Front(); el != nil; el = e.queue.Front() {
		w := el.Value.(*wwaiter)
		if w.place || e.used+w.req.Weight > e.limit {
			return
		}
		s.unqueue(e, w)
		w.granted = true
		w.ch <- s.grantWeighted(e, w.req)
	}
}

// grantWeighted gives r a hold on e. s.mu is held.
func (s *Store) grantWeighted(e *wentry, r backend.Request) *wlease {
	s.fence++
	now := time.Now()
	l := &wlease{
		s:       s,
		e:       e,
		owner:   r.Owner,
		token:   s.fence,
		weight:  r.Weight,
		value:   r.Value,
		start:   now,
		expires: now.Add(r.TTL),
		lost:    backend.NewLostSignal(),
	}
	e.holds[l] = struct{}{}
	e.used += r.Weight
	l.timer = time.AfterFunc(r.TTL, l.expire)
	s.notify(e.key)
	return l
}

// freeWeightedIfIdle drops the state of a weighted name that nobody holds
// or waits for. s.mu is held.
func (s *Store) freeWeightedIfIdle(e *wentry) {
	if e != nil && len(e.holds) == 0 && e.queue.Len() == 0 && s.weighted[e.key] == e {
		delete(s.weighted, e.key)
	}
}

// wlease is one weighted hold on a Store.
type wlease struct {
	s     *Store
	e     *wentry
	owner string
	token uint64
	start time.Time

	// Guarded by s.mu.
	weight  int64
	value   string
	expires time.Time
	timer   *time.Timer

	lost *backend.LostSignal
}

var (
	_ backend.Downgrader = (*wlease)(nil)
	_ backend.Proclaimer = (*wlease)(nil)
)

func (l *wlease) Token() uint64             { return l.token }
func (l *wlease) Start() time.Time          { return l.start }
func (l *wlease) Lost() *backend.LostSignal { return l.lost }

// current reports whether l still holds. s.mu is held.
func (l *wlease) current() bool {
	_, ok := l.e.holds[l]
	return ok
}

func (l *wlease) Renew(_ context.Context, ttl time.Duration) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if !l.current() {
		return backend.ErrLost
	}
	l.expires = time.Now().Add(ttl)
	l.timer.Reset(ttl)
	return nil
}

func (l *wlease) Release(context.Context) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if !l.current() {
		return backend.ErrLost
	}
	l.vacate()
	return nil
}

// Downgrade implements backend.Downgrader.
func (l *wlease) Downgrade(_ context.Context, weight int64) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if !l.current() {
		return backend.ErrLost
	}
	if weight < 1 || weight >= l.weight {
		return fmt.Errorf("%w: downgrade from weight %d to %d", backend.ErrInvalidOption, l.weight, weight)
	}
	l.e.used -= l.weight - weight
	l.weight = weight
	l.s.process(l.e)
	l.s.notify(l.e.key)
	return nil
}

// Proclaim implements backend.Proclaimer.
func (l *wlease) Proclaim(_ context.Context, value string) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if !l.current() {
		return backend.ErrLost
	}
	l.value = value
	l.s.notify(l.e.key)
	return nil
}

func (l *wlease) expire() {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if !l.current() || time.Now().Before(l.expires) {
		return
	}
	l.drop()
}

// drop ends the hold against the owner's will. s.mu is held.
func (l *wlease) drop() {
	l.lost.Fire()
	l.vacate()
}

// vacate ends l and grants what now fits. s.mu is held.
func (l *wlease) vacate() {
	l.timer.Stop()
	delete(l.e.holds, l)
	l.e.used -= l.weight
	l.s.notify(l.e.key)
	l.s.process(l.e)
	l.s.freeWeightedIfIdle(l.e)
}

// Watch implements backend.Watcher for the weighted kinds: the channel
// receives when a hold of the name is granted, ends, or changes.
func (d *Driver) Watch(kind backend.Kind, name string) (<-chan struct{}, func()) {
	if kind == backend.Mutex {
		return nil, func() {}
	}
	s := d.s
	k := wkey{kind, name}
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	if s.watchers[k] == nil {
		s.watchers[k] = make(map[chan struct{}]struct{})
	}
	s.watchers[k][ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.watchers[k], ch)
		if len(s.watchers[k]) == 0 {
			delete(s.watchers, k)
		}
	}
}

// notify tells k's watchers that its holds changed. s.mu is held.
func (s *Store) notify(k wkey) {
	for ch := range s.watchers[k] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
