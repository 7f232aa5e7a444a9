package locker

import (
	"context"
	"time"
)

// Observer sees what a Client does: every acquisition and its outcome,
// every end of a hold, every renewal. Set one with WithObserver; package
// otellocker turns the events into OpenTelemetry metrics and spans, and
// package lockadmin into live charts.
//
// The methods are called synchronously: an acquisition's on the goroutine
// that called Lock, TryLock or LockTimeout; a hold's end on the goroutine of
// Unlock, or of the watchdog or the store's loss signal; a renewal's on the
// watchdog's. They must return quickly, must be safe for concurrent use, and
// must not call the Client. A Client without an observer pays one nil check
// per event.
type Observer interface {
	// AcquireStarted is called when an acquisition starts, re-entries
	// included. The context it returns carries on: the driver's calls
	// for this acquisition receive it, and so does AcquireEnded (so an
	// observer can start a span here and end it there).
	AcquireStarted(ctx context.Context, e AcquireStart) context.Context

	// AcquireEnded is called once for every AcquireStarted, with ctx as
	// AcquireStarted returned it.
	AcquireEnded(ctx context.Context, e AcquireEnd)

	// HoldEnded is called once when a hold ends: released by its last
	// Unlock, or lost. ctx is the one AcquireEnded received for the
	// acquisition that began the hold.
	HoldEnded(ctx context.Context, e HoldEnd)

	// Renewed is called after every renewal attempt of the watchdog.
	Renewed(e Renewal)
}

// AcquireStart describes an acquisition that begins.
type AcquireStart struct {
	Name string // the lock's name
	Kind Kind   // the primitive: Mutex, Semaphore or RWMutex
	// Op names the method: "lock", "trylock" or "locktimeout" (a Mutex,
	// an RWMutex's write side, a MultiLock's names), "rlock", "tryrlock"
	// or "rlocktimeout" (an RWMutex's read side), "acquire",
	// "tryacquire" or "acquiretimeout" (a Semaphore's permits).
	Op string
	// Reentry tells that the caller's ctx already holds the lock: the
	// acquisition re-enters it without a call to the store.
	Reentry bool
}

// Outcome is how an acquisition ended.
type Outcome int

// Outcomes of an acquisition.
const (
	// OutcomeAcquired: the lock is held (or re-entered).
	OutcomeAcquired Outcome = iota
	// OutcomeBusy: another owner held it and the call did not wait
	// (TryLock, or LockTimeout with no wait).
	OutcomeBusy
	// OutcomeTimedOut: the wait of LockTimeout ran out.
	OutcomeTimedOut
	// OutcomeCancelled: ctx ended, or the Client was closed, during the
	// wait.
	OutcomeCancelled
	// OutcomeFailed: the store failed, or the input was bad.
	OutcomeFailed
)

var outcomeNames = [...]string{"acquired", "busy", "timed_out", "cancelled", "failed"}

// String returns the outcome's name: "acquired", "busy", "timed_out",
// "cancelled" or "failed".
func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return "unknown"
	}
	return outcomeNames[o]
}

// AcquireEnd describes how an acquisition ended.
type AcquireEnd struct {
	Name    string
	Kind    Kind
	Op      string
	Reentry bool
	Outcome Outcome
	// Wait is the time from the call to its outcome.
	Wait time.Duration
	// Token is the hold's fencing token when Outcome is OutcomeAcquired.
	Token uint64
	// Err is the error returned to the caller (OutcomeCancelled, OutcomeFailed).
	Err error
}

// HoldEnd describes the end of a hold.
type HoldEnd struct {
	Name  string
	Kind  Kind
	Token uint64
	// Held is how long the hold lasted: from the acquisition's return to
	// its release or loss.
	Held time.Duration
	// Reason says how the hold ended: Released, or one of the reasons of
	// a loss. Its values are few, so it can label a metric.
	Reason Reason
	// Cause is the error of a hold that did not end by its last Unlock:
	// it wraps ErrLost (or ErrClosed). Nil for Released.
	Cause error
}

// Lost reports whether the hold ended other than by its last Unlock.
func (e HoldEnd) Lost() bool { return e.Reason != Released }

// Reason is how a hold ended.
type Reason string

// Reasons a hold ends.
const (
	// Released: its last Unlock released it.
	Released Reason = "released"
	// LostRenewalFailed: no renewal succeeded before the lease could run
	// out (the store was unreachable or slow).
	LostRenewalFailed Reason = "renewal_failed"
	// LostRefused: a renewal found the hold gone (expired, or freed by
	// force).
	LostRefused Reason = "refused"
	// LostStore: the store reported the hold gone (a session expired, a
	// key was deleted).
	LostStore Reason = "store"
	// LostLeaseEnded: a fixed lease (WithFixedLease) ran out before Unlock.
	LostLeaseEnded Reason = "lease_ended"
	// LostAtRelease: Unlock found the hold already gone, before anything
	// else had noticed.
	LostAtRelease Reason = "found_at_release"
	// Closed: the Client was closed while the lock was held.
	Closed Reason = "closed"
)

// Renewal describes one renewal attempt of the watchdog.
type Renewal struct {
	Name  string
	Token uint64
	// Latency is the time the store took to answer.
	Latency time.Duration
	// Err is nil when the lease was extended. It wraps ErrLost when the
	// store refused (the hold is gone); other errors are retried.
	Err error
}

// WithObserver sets the Client's observer (a Client option). To have
// several, combine them with Observers.
func WithObserver(o Observer) Option {
	return func(c *config) error {
		if o == nil {
			return errorf(ErrInvalidOption, "nil Observer")
		}
		c.observer = o
		c.clientOnly = append(c.clientOnly, "WithObserver")
		return nil
	}
}

// WithLostHook sets a function that is called once for every hold that
// ends other than by its last Unlock (a Client option), for users who only want to hear of losses: log
// them, page someone. It runs synchronously, as an Observer's methods do.
func WithLostHook(f func(HoldEnd)) Option {
	return func(c *config) error {
		if f == nil {
			return errorf(ErrInvalidOption, "nil lost hook")
		}
		c.lostHook = f
		c.clientOnly = append(c.clientOnly, "WithLostHook")
		return nil
	}
}

// Observers returns an Observer that calls each of obs in turn; the context
// returned by one AcquireStarted is passed to the next.
func Observers(obs ...Observer) Observer {
	var list multiObserver
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	return list
}

type multiObserver []Observer

func (m multiObserver) AcquireStarted(ctx context.Context, e AcquireStart) context.Context {
	for _, o := range m {
		ctx = o.AcquireStarted(ctx, e)
	}
	return ctx
}

func (m multiObserver) AcquireEnded(ctx context.Context, e AcquireEnd) {
	for _, o := range m {
		o.AcquireEnded(ctx, e)
	}
}

func (m multiObserver) HoldEnded(ctx context.Context, e HoldEnd) {
	for _, o := range m {
		o.HoldEnded(ctx, e)
	}
}

func (m multiObserver) Renewed(e Renewal) {
	for _, o := range m {
		o.Renewed(e)
	}
}
