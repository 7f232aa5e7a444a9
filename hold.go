package locker

import (
	"fmt"
	"sync"
	"time"

	"github.com/golocker/locker/backend"
)

// hold is one granted lease and its watchdog state.
type hold struct {
	m              *Mutex
	lease          backend.Lease
	token          uint64
	ttl            time.Duration
	releaseTimeout time.Duration
	renew          bool // the scheduler renews it
	fixed          bool // WithFixedLease: it ends at its TTL
	session        bool // the driver keeps it alive (SessionLease)

	lost     chan struct{} // closed when the hold is declared lost
	lostOnce sync.Once
	cause    error // set before lost is closed

	ended   chan struct{} // closed when the hold ends (Unlock, Close)
	endOnce sync.Once
	// stopLost stops the lease's AfterLost function (backend.LostNotifier),
	// when the Client registered one; set before the hold is shared.
	stopLost func() bool

	// Watchdog state, guarded by scheduler.mu.
	validUntil time.Time // the lease cannot have run out on the store before this
	next       time.Time // next event: a renewal, or the deadline
	idx        int       // index in the heap, -1 when not in it
	renewing   bool
	done       bool // no more events
	fails      int  // renewal failures in a row
}

func newHold(m *Mutex, l backend.Lease, caps backend.Capabilities, start time.Time) *hold {
	h := &hold{
		m:              m,
		lease:          l,
		token:          l.Token(),
		ttl:            m.cfg.ttl,
		releaseTimeout: m.cfg.releaseTimeout,
		fixed:          m.cfg.fixed,
		session:        caps.SessionLease,
		lost:           make(chan struct{}),
		ended:          make(chan struct{}),
		validUntil:     start.Add(m.cfg.ttl),
		idx:            -1,
	}
	h.renew = !h.fixed && !h.session
	return h
}

// deadlineOnly reports whether the hold has a deadline but no renewals: a
// fixed lease.
func (h *hold) deadlineOnly() bool { return h.fixed }

// margin is how long before the lease's end the hold is declared lost. The
// lease is measured from before the request was sent, so the store's
// countdown started later than ours; the margin covers clock-rate drift and
// the time the owner needs to stop.
func margin(ttl time.Duration) time.Duration { return ttl / 10 }

func (h *hold) deadline() time.Time { return h.validUntil.Add(-margin(h.ttl)) }

// declareLost closes lost once, recording why.
func (h *hold) declareLost(cause error) {
	h.lostOnce.Do(func() {
		h.cause = fmt.Errorf("%w: %v", ErrLost, cause)
		close(h.lost)
	})
}

func (h *hold) isLost() bool {
	select {
	case <-h.lost:
		return true
	default:
		return false
	}
}

// lostErr returns the error wrapping ErrLost if the hold was lost, else nil.
func (h *hold) lostErr() error {
	if h.isLost() {
		return h.cause
	}
	return nil
}

func (h *hold) end() {
	h.endOnce.Do(func() {
		close(h.ended)
		if h.stopLost != nil {
			h.stopLost()
		}
	})
}
