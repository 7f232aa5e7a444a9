// Package ticket keeps the places of a driver's waiters in a lock's queue
// when the store keeps only a bakery's counters, as mysqllock's rows and
// mongolock's documents do: a ticket counter (tickets), the ticket whose
// turn it is (serving) and when the turn moved (serving_at).
//
// Polling alone is not fair: the owner that just released takes the lock
// again before the waiters that back off look. So a waiting Lock that
// finds the lock held or queued takes a ticket; a free lock goes to the
// ticket whose turn it is, which passes the turn to the next ticket; a
// single attempt (TryLock) takes a free lock whatever the queue, as
// java.util.concurrent's tryLock does even on a fair lock. A waiter that
// gave up (its ctx ended) or stalled leaves its ticket behind: when the
// lock has been free for the claim window and the turn is older than that,
// a waiter with a later ticket takes the turn over, and the waiters it
// skipped take new tickets; a new waiter may then take the free lock too
// (waiters with short deadlines, each leaving a ticket behind, would
// otherwise never get past them). Every decision is in the store's
// acquiring statement or update, on the store's clock; this package only
// schedules the looks.
//
// A Queue remembers the ticket of each of a Driver's waiting acquisitions
// (its turns). A waiter with a ticket reads the lock (no write) and tries
// only when the lock is free and its turn has come; its looks are
// scheduled through backend.HeldError.Left, which package locker's wait
// never exceeds: the head and the next one look at a quarter of the time
// the current hold has lasted, from 1 ms up to a third of the claim window
// (where a release's notification wakes the head, every third of the
// window); a waiter further back looks when it should be next, from how
// fast serving moved, and package locker's earlier calls are answered from
// memory.
package ticket

import (
	"sync"
	"time"

	"github.com/golocker/locker/backend"
)

const (
	// maxLookPause is the longest a waiter goes without looking, as
	// package locker's back-off.
	maxLookPause = 250 * time.Millisecond
	// turnStale is how long an untouched ticket is remembered: a wait that
	// ended without a grant (its ctx ended) never comes back.
	turnStale = 10 * time.Second
)

// View is what a look at a lock tells a waiter: the ticket whose turn it
// is, whether the lock is free, and how long the current hold (or the free
// spell) has lasted.
type View struct {
	Serving int64
	Free    bool
	Age     time.Duration
}

// Queue holds the tickets of a Driver's waiting acquisitions, by name and
// owner (unique to one acquisition). Its zero value is not ready: set
// Window. It is safe for concurrent use.
type Queue struct {
	// Window is how long a free lock waits for the head to take it: the
	// driver's store uses the same window to let a later ticket take the
	// turn over.
	Window time.Duration

	mu     sync.Mutex
	byName map[string]map[string]*Turn
	swept  time.Time
}

// Turn is one waiting acquisition's place in a lock's queue.
type Turn struct {
	Ticket    int64         // the ticket the store gave
	rank      int64         // turns ahead at the last look; 0: its turn, < 0: skipped
	serving   int64         // serving when it last moved
	moved     time.Time     // when serving was seen to move
	per       time.Duration // estimated time per turn, 0 if unknown
	looked    time.Time     // the last look
	next      time.Time     // when a waiter further back should look again
	holdSince time.Time     // when the current hold began (its turn moved)
	used      time.Time
}

// Get returns the turn of owner on name, or nil.
func (q *Queue) Get(name, owner string) *Turn {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.byName[name][owner]
}

// Record notes that owner holds ticket on name, with rank unknown.
func (q *Queue) Record(name, owner string, ticket int64) *Turn {
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	if now.Sub(q.swept) > time.Second {
		q.swept = now
		for n, m := range q.byName {
			for o, t := range m {
				if now.Sub(t.used) > turnStale {
					delete(m, o)
				}
			}
			if len(m) == 0 {
				delete(q.byName, n)
			}
		}
	}
	if q.byName == nil {
		q.byName = make(map[string]map[string]*Turn)
	}
	m := q.byName[name]
	if m == nil {
		m = make(map[string]*Turn)
		q.byName[name] = m
	}
	t := &Turn{Ticket: ticket, rank: 1, moved: now, used: now}
	m[owner] = t
	return t
}

// Forget drops owner's ticket on name: it was granted, or has no turn.
func (q *Queue) Forget(name, owner string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if m := q.byName[name]; m != nil {
		delete(m, owner)
		if len(m) == 0 {
			delete(q.byName, name)
		}
	}
}

// Wants reports whether a waiter of this Driver on name may have its turn
// when serving is the ticket whose turn it is (or when it has no ticket
// yet).
func (q *Queue) Wants(name string, serving int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.byName[name]
	if len(m) == 0 {
		return true
	}
	for _, t := range m {
		if t.Ticket <= serving {
			return true
		}
	}
	return false
}

// Observe updates t with a look at the lock, v, and returns how long t's
// waiter may wait before it looks again (0: as long as the holder's lease
// and package locker's back-off say). notify says that a release wakes
// the head.
func (q *Queue) Observe(t *Turn, v View, notify bool) time.Duration {
	serving, free := v.Serving, v.Free
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	t.used, t.looked, t.holdSince = now, now, now.Add(-v.Age)
	if serving > t.serving {
		per := now.Sub(t.moved) / time.Duration(serving-t.serving)
		if t.serving > 0 && t.per > 0 {
			per = (per + t.per) / 2
		}
		if t.serving > 0 {
			t.per = per
		}
		t.serving, t.moved = serving, now
	} else if d := now.Sub(t.moved); d > t.per && t.per > 0 {
		t.per = d // the current turn already lasts longer
	}
	rank := t.Ticket - serving
	t.rank = rank
	if rank < 0 {
		return time.Millisecond // skipped: it takes a new ticket at its next try
	}
	if rank > 1 {
		// It is next after rank-1 more turns from when serving last
		// moved: look then.
		next := time.Duration(0)
		if !notify && t.per > 0 {
			next = min(max(t.moved.Add(time.Duration(rank-1)*t.per).Sub(now), time.Millisecond), maxLookPause)
		}
		if free && (next == 0 || next > q.Window/2) {
			next = q.Window / 2
		}
		t.next = now.Add(next)
		return next
	}
	return q.headNext(t, now, notify)
}

// headNext is when the head (or the next one, which is the head as soon as
// the head is granted) looks again: at a quarter of the time the current
// hold has lasted, about every millisecond behind short holds and every
// third of Window behind long ones; every third of Window when a release
// wakes it.
func (q *Queue) headNext(t *Turn, now time.Time, notify bool) time.Duration {
	if notify {
		return q.Window / 3
	}
	return min(max(now.Sub(t.holdSince)/4, time.Millisecond), q.Window/3)
}

// NotYet returns how long the waiter of t, further back in the queue,
// has before it should look again (0: it should look now). Package
// locker's back-off calls Acquire again after 2, 4, 8 … ms whatever the
// driver says (HeldError.Left only shortens a pause): those calls are
// answered from memory, without a request to the store.
func (q *Queue) NotYet(t *Turn) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.rank <= 1 {
		return 0
	}
	return max(time.Until(t.next), 0)
}

// TryBlind reports whether the head, or the next one, may try again
// without reading the lock first: it read it recently. A try costs about as
// much as a read, gets the lock as soon as it is free and its turn, and
// checks the turn itself.
func (q *Queue) TryBlind(t *Turn) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return t.rank >= 0 && t.rank <= 1 && !t.looked.IsZero() && time.Since(t.looked) < q.Window/2
}

// HeadHeld is the HeldError of a blind try (see TryBlind) that did not get
// the lock.
func (q *Queue) HeadHeld(t *Turn, notify bool) error {
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	t.used = now
	return &backend.HeldError{Left: q.headNext(t, now, notify)}
}
