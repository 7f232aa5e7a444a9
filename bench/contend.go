package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golocker/locker/internal/driverkit"
)

// Params is the load of a contended run.
type Params struct {
	Hold     time.Duration // how long a holder keeps the lock
	Think    time.Duration // how long a handle waits after Unlock before the next Lock
	Duration time.Duration // how long the run lasts
}

// Result is what a contended run measured. Times are in nanoseconds so
// that a worker can send it as JSON.
type Result struct {
	// Counts is the acquisitions of each handle.
	Counts []int `json:"counts"`
	// Waits is the time from calling Lock to holding, of every
	// acquisition, plus the waits still in flight when the run ended
	// (lower bounds of waits that were cut short).
	Waits []int64 `json:"waits_ns"`
	// Intervals are [acquired, releasing) in Unix nanoseconds, wall clock:
	// from Lock's return to the call of Unlock. Holds of separate
	// processes are checked against each other with them.
	Intervals [][2]int64 `json:"intervals"`
	// Overlaps counts the times a handle found another holder inside
	// (within one process).
	Overlaps int `json:"overlaps"`
	// Errors counts Lock and Unlock calls that failed other than by the
	// end of the run; FirstError is the first of them.
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
}

// maxRounds bounds the lock/unlock rounds of one handle, besides the
// run's duration.
const maxRounds = 1_000_000

// unlockTimeout bounds one Unlock.
const unlockTimeout = 5 * time.Second

// Contend runs the handles against each other from start to
// start+p.Duration. inside is the number of current holders, shared by
// every handle of the process: a holder that finds it above 1 counts an
// overlap.
func Contend(ctx context.Context, hs []Handle, p Params, start time.Time, inside *atomic.Int32) Result {
	end := start.Add(p.Duration)
	runCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	if d := time.Until(start); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}

	per := make([]Result, len(hs))
	var wg sync.WaitGroup
	for i, h := range hs {
		wg.Go(func() {
			per[i] = contendOne(runCtx, h, p, inside)
		})
	}
	wg.Wait()
	return Merge(per...)
}

// contendOne is one handle's loop: Lock, hold, Unlock, think, until
// runCtx ends.
func contendOne(runCtx context.Context, h Handle, p Params, inside *atomic.Int32) Result {
	r := Result{Counts: []int{0}}
	fail := func(op string, err error) {
		r.Errors++
		if r.FirstError == "" {
			r.FirstError = fmt.Sprintf("%s: %v", op, err)
		}
	}
	for range maxRounds {
		if runCtx.Err() != nil {
			break
		}
		t0 := time.Now()
		if err := h.Lock(runCtx); err != nil {
			if runCtx.Err() != nil {
				r.Waits = append(r.Waits, int64(time.Since(t0)))
				break
			}
			fail("lock", err)
			driverkit.Sleep(runCtx, p.Think)
			continue
		}
		acquired := time.Now()
		if inside.Add(1) != 1 {
			r.Overlaps++
		}
		r.Waits = append(r.Waits, int64(acquired.Sub(t0)))
		time.Sleep(p.Hold)
		inside.Add(-1)
		releasing := time.Now()
		r.Intervals = append(r.Intervals, [2]int64{acquired.UnixNano(), releasing.UnixNano()})
		r.Counts[0]++
		uctx, cancel := context.WithTimeout(context.WithoutCancel(runCtx), unlockTimeout)
		if err := h.Unlock(uctx); err != nil {
			fail("unlock", err)
		}
		cancel()
		driverkit.Sleep(runCtx, p.Think)
	}
	return r
}

// Merge combines the results of several processes, or of the handles of
// one (each handle's Result has one count).
func Merge(rs ...Result) Result {
	var m Result
	for _, r := range rs {
		m.Counts = append(m.Counts, r.Counts...)
		m.Waits = append(m.Waits, r.Waits...)
		m.Intervals = append(m.Intervals, r.Intervals...)
		m.Overlaps += r.Overlaps
		m.Errors += r.Errors
		if m.FirstError == "" {
			m.FirstError = r.FirstError
		}
	}
	return m
}

// Acquisitions returns the total count.
func (r Result) Acquisitions() int {
	n := 0
	for _, c := range r.Counts {
		n += c
	}
	return n
}
