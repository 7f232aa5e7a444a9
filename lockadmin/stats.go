package lockadmin

import (
	"math"
	"strconv"
	"time"

	"github.com/golocker/locker"
)

// Stats is a Recorder's statistics: one value per second for each series,
// oldest first, for the complete seconds of the window, or since the
// Recorder was created if that is later (the current second is not over,
// so it is left out).
type Stats struct {
	Enabled bool `json:"enabled"`
	// Start is the Unix time of the first second; Seconds how many
	// seconds each series has.
	Start   int64 `json:"start"`
	Seconds int   `json:"seconds"`

	// Acquisitions that ended in each second, by outcome (re-entries
	// aside, they count in Reentries).
	Acquired  []uint32 `json:"acquired"`
	Busy      []uint32 `json:"busy"`
	TimedOut  []uint32 `json:"timed_out"`
	Cancelled []uint32 `json:"cancelled"`
	Failed    []uint32 `json:"failed"`
	Reentries []uint32 `json:"reentries"`

	// The median and 99th percentile wait, in milliseconds, of the
	// acquisitions that got the lock; null in a second without one.
	WaitP50MS []Millis `json:"wait_p50_ms"`
	WaitP99MS []Millis `json:"wait_p99_ms"`

	// Holds that ended in each second: released by Unlock, and lost (any
	// other reason, Client close included), also by reason.
	Released     []uint32            `json:"released"`
	Lost         []uint32            `json:"lost"`
	LostByReason map[string][]uint32 `json:"lost_by_reason"`

	// Renewals in each second, by outcome.
	RenewalsOK      []uint32 `json:"renewals_ok"`
	RenewalsFailed  []uint32 `json:"renewals_failed"`
	RenewalsRefused []uint32 `json:"renewals_refused"`

	// The most holds, and acquisitions in progress, at any time in each
	// second.
	Active  []int32 `json:"active"`
	Waiters []int32 `json:"waiters"`

	Totals Totals `json:"totals"`
}

// Totals sums up the window, and gives the gauges' current values.
type Totals struct {
	Acquisitions map[string]uint64 `json:"acquisitions"` // by outcome
	WaitP50MS    Millis            `json:"wait_p50_ms"`
	WaitP99MS    Millis            `json:"wait_p99_ms"`
	Lost         uint64            `json:"lost"`
	ActiveNow    int32             `json:"active_now"`
	WaitersNow   int32             `json:"waiters_now"`
}

// Millis is a duration in milliseconds; NaN (no value) is JSON null.
type Millis float64

// MarshalJSON implements json.Marshaler.
func (m Millis) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(m)) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(m), 'f', 3, 64), nil
}

func millis(d time.Duration, ok bool) Millis {
	if !ok {
		return Millis(math.NaN())
	}
	return Millis(float64(d) / float64(time.Millisecond))
}

// Snapshot returns the statistics of the last window seconds.
func (r *Recorder) Snapshot() Stats {
	now := r.now().Unix()
	n := int(max(min(now-r.start, window-1), 1))
	st := Stats{
		Enabled:         true,
		Start:           now - int64(n),
		Seconds:         n,
		Acquired:        make([]uint32, n),
		Busy:            make([]uint32, n),
		TimedOut:        make([]uint32, n),
		Cancelled:       make([]uint32, n),
		Failed:          make([]uint32, n),
		Reentries:       make([]uint32, n),
		WaitP50MS:       make([]Millis, n),
		WaitP99MS:       make([]Millis, n),
		Released:        make([]uint32, n),
		Lost:            make([]uint32, n),
		LostByReason:    make(map[string][]uint32),
		RenewalsOK:      make([]uint32, n),
		RenewalsFailed:  make([]uint32, n),
		RenewalsRefused: make([]uint32, n),
		Active:          make([]int32, n),
		Waiters:         make([]int32, n),
	}
	outcomes := [numOutcomes][]uint32{st.Acquired, st.Busy, st.TimedOut, st.Cancelled, st.Failed}
	var total [numBuckets]uint32
	var totalN uint64
	var totalOut [numOutcomes]uint64

	r.mu.Lock()
	defer r.mu.Unlock()
	st.Totals.ActiveNow, st.Totals.WaitersNow = r.active, r.waiting
	// Walk back from the current second: a second without events has the
	// gauges' values that the next second with events started from.
	active, waiting := r.active, r.waiting
	if s := &r.secs[uint64(now)%window]; s.sec == now {
		active, waiting = s.activeStart, s.waitingStart
	}
	for i := n - 1; i >= 0; i-- {
		sec := st.Start + int64(i)
		s := &r.secs[uint64(sec)%window]
		if s.sec != sec {
			st.Active[i], st.Waiters[i] = active, waiting
			st.WaitP50MS[i], st.WaitP99MS[i] = millis(0, false), millis(0, false)
			continue
		}
		st.Active[i], st.Waiters[i] = s.activeMax, s.waitingMax
		active, waiting = s.activeStart, s.waitingStart
		for o := range numOutcomes {
			outcomes[o][i] = s.outcomes[o]
			totalOut[o] += uint64(s.outcomes[o])
		}
		st.Reentries[i] = s.reentries
		acq := uint64(s.outcomes[locker.OutcomeAcquired])
		st.WaitP50MS[i] = millis(percentile(&s.wait, acq, 0.5))
		st.WaitP99MS[i] = millis(percentile(&s.wait, acq, 0.99))
		for b, c := range s.wait {
			total[b] += c
		}
		totalN += acq
		st.Released[i] = s.ends[0]
		for k := 1; k < numReasons; k++ {
			c := s.ends[k]
			if c == 0 {
				continue
			}
			st.Lost[i] += c
			name := string(endReasons[k])
			if st.LostByReason[name] == nil {
				st.LostByReason[name] = make([]uint32, n)
			}
			st.LostByReason[name][i] = c
			st.Totals.Lost += uint64(c)
		}
		st.RenewalsOK[i] = s.renewals[renewOK]
		st.RenewalsFailed[i] = s.renewals[renewFailed]
		st.RenewalsRefused[i] = s.renewals[renewRefused]
	}
	st.Totals.Acquisitions = make(map[string]uint64, numOutcomes)
	for o := range numOutcomes {
		st.Totals.Acquisitions[locker.Outcome(o).String()] = totalOut[o]
	}
	st.Totals.WaitP50MS = millis(percentile(&total, totalN, 0.5))
	st.Totals.WaitP99MS = millis(percentile(&total, totalN, 0.99))
	return st
}
