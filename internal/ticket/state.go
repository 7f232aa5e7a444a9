package ticket

import (
	"time"

	"github.com/golocker/locker/backend"
)

// State is a lock as a driver's acquiring request returns it or a look
// reads it: its holder, if any, and its queue's counters.
type State struct {
	Exists           bool
	Owner            string
	Fence            int64
	Left             time.Duration // the holder's remaining lease, <= 0 when free
	Tickets, Serving int64
	Lapsed           bool          // free for the claim window without the head taking it
	Age              time.Duration // since the turn moved
}

// WorthTrying reports whether an attempt with ticket may get the lock or
// change the ticket: the lock is free and it is the ticket's turn (or the
// head's turn lapsed, or nobody queues), or the ticket was skipped.
func (s State) WorthTrying(ticket int64) bool {
	if ticket < s.Serving || ticket > s.Tickets {
		return true
	}
	return s.Left <= 0 && (ticket == s.Serving || s.Lapsed)
}

// Held returns the HeldError of an attempt that found s. For a waiter
// with a ticket (t not nil) on a lock that exists, Left is also bounded by
// when it should look again; notify says whether a release's notification
// wakes the head (Observe).
func (q *Queue) Held(s State, t *Turn, notify bool) error {
	he := &backend.HeldError{}
	if s.Left > 0 {
		he.Left, he.Owner, he.Token = s.Left, s.Owner, uint64(s.Fence)
	}
	if t != nil && s.Exists {
		if next := q.Observe(t, View{Serving: s.Serving, Free: s.Left <= 0, Age: s.Age}, notify); next > 0 && (he.Left <= 0 || next < he.Left) {
			he.Left = next
		}
	}
	return he
}
