package lockadmin

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/golocker/locker"
)

// window is how many seconds a Recorder keeps.
const window = 300

const numOutcomes = int(locker.OutcomeFailed) + 1

// endReasons are the reasons a hold ends, in the order of second.ends; a
// reason that is not listed counts as the last ("other").
var endReasons = [...]locker.Reason{
	locker.Released,
	locker.LostRenewalFailed,
	locker.LostRefused,
	locker.LostStore,
	locker.LostLeaseEnded,
	locker.LostAtRelease,
	locker.Closed,
	"other",
}

const numReasons = len(endReasons)

func reasonIndex(r locker.Reason) int {
	for i, x := range endReasons[:numReasons-1] {
		if r == x {
			return i
		}
	}
	return numReasons - 1
}

// Renewal outcomes, in the order of second.renewals.
const (
	renewOK = iota
	renewFailed
	renewRefused
	numRenewals
)

// second holds what happened in one second. Its size is fixed, so a
// Recorder's memory is too: window × about 480 bytes.
type second struct {
	sec       int64 // Unix time; the slot is stale when it is not the second asked for
	outcomes  [numOutcomes]uint32
	reentries uint32
	ends      [numReasons]uint32
	renewals  [numRenewals]uint32
	// The gauges when the second's first event came, and their highest
	// value during the second.
	activeStart, activeMax   int32
	waitingStart, waitingMax int32
	// wait is the histogram of the waits of the acquisitions that got
	// the lock (re-entries aside).
	wait [numBuckets]uint32
}

// Recorder keeps per-second statistics of a Client's locks for the last
// five minutes, for the admin page's charts. It implements locker.Observer:
// pass it to the Client with locker.WithObserver and to the handler with
// WithRecorder.
//
// Its memory is fixed (about 150 KB) and its methods allocate nothing:
// each takes one mutex for a few counter increments. Re-entries count only
// as re-entries: they are neither waiters nor new holds.
type Recorder struct {
	now   func() time.Time
	start int64 // Unix second of the Recorder's creation

	mu      sync.Mutex
	active  int32 // holds now
	waiting int32 // acquisitions in progress now
	secs    [window]second
}

var _ locker.Observer = (*Recorder)(nil)

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return newRecorder(time.Now) }

func newRecorder(now func() time.Time) *Recorder {
	return &Recorder{now: now, start: now().Unix()}
}

// slot returns the record of the second sec, which it starts if needed,
// or nil when its place already holds a later second (an event that took
// longer than the window to report). The caller holds r.mu and calls it
// before changing the gauges, so that a new record notes their values at
// the start of the second.
func (r *Recorder) slot(sec int64) *second {
	s := &r.secs[uint64(sec)%window]
	switch {
	case s.sec == sec:
		return s
	case s.sec > sec:
		return nil
	}
	*s = second{sec: sec, activeStart: r.active, activeMax: r.active, waitingStart: r.waiting, waitingMax: r.waiting}
	return s
}

// AcquireStarted implements locker.Observer.
func (r *Recorder) AcquireStarted(ctx context.Context, e locker.AcquireStart) context.Context {
	if e.Reentry {
		return ctx
	}
	sec := r.now().Unix()
	r.mu.Lock()
	s := r.slot(sec) // before the change: it notes the gauges' start
	r.waiting++
	if s != nil {
		s.waitingMax = max(s.waitingMax, r.waiting)
	}
	r.mu.Unlock()
	return ctx
}

// AcquireEnded implements locker.Observer.
func (r *Recorder) AcquireEnded(_ context.Context, e locker.AcquireEnd) {
	sec := r.now().Unix()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.slot(sec)
	if e.Reentry {
		if s != nil {
			s.reentries++
		}
		return
	}
	if r.waiting > 0 {
		r.waiting--
	}
	if e.Outcome == locker.OutcomeAcquired {
		r.active++
	}
	if s == nil {
		return
	}
	o := int(e.Outcome)
	if o < 0 || o >= numOutcomes {
		o = int(locker.OutcomeFailed)
	}
	s.outcomes[o]++
	if e.Outcome == locker.OutcomeAcquired {
		s.activeMax = max(s.activeMax, r.active)
		s.wait[bucket(e.Wait)]++
	}
}

// HoldEnded implements locker.Observer.
func (r *Recorder) HoldEnded(_ context.Context, e locker.HoldEnd) {
	sec := r.now().Unix()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.slot(sec)
	if r.active > 0 {
		r.active--
	}
	if s != nil {
		s.ends[reasonIndex(e.Reason)]++
	}
}

// Renewed implements locker.Observer.
func (r *Recorder) Renewed(e locker.Renewal) {
	k := renewOK
	switch {
	case errors.Is(e.Err, locker.ErrLost):
		k = renewRefused
	case e.Err != nil:
		k = renewFailed
	}
	sec := r.now().Unix()
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.slot(sec); s != nil {
		s.renewals[k]++
	}
}
