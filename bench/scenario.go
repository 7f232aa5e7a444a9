package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// Scenario is a contended load: Handles handles on one lock name, in this
// process (Procs 0) or spread evenly over Procs worker processes.
type Scenario struct {
	Handles int
	Procs   int
}

// Names are the scenario's parts of a benchmark name: "handles=8",
// "procs=1" (in the benchmark's own process) or "procs=4".
func (s Scenario) Names() (handles, procs string) {
	return "handles=" + strconv.Itoa(s.Handles), "procs=" + strconv.Itoa(max(s.Procs, 1))
}

// Scenarios are the contended loads the benchmarks run.
var Scenarios = []Scenario{{Handles: 8}, {Handles: 32}, {Handles: 32, Procs: 4}}

// Measurement is one contended run of one configuration.
type Measurement struct {
	Result
	Duration time.Duration
	Calls    int64 // commands the clients sent in the run (see CommandStats.Counts)
	AllCalls int64 // commands Redis counted, those run by scripts included
	// ProcCounts is the acquisitions of each worker process, nil when the
	// run was in this process.
	ProcCounts []int
	// Commands is the calls of each command during the run.
	Commands CommandStats
}

// lockName is the name every contended run locks.
const lockName = "bench/contended"

// Run flushes the server at addr and runs the scenario with cfg. exe is
// the test binary, for workers.
func (s Scenario) Run(ctx context.Context, cfg Config, addr, exe string, p Params) (Measurement, error) {
	if _, err := Do(ctx, addr, "FLUSHALL"); err != nil {
		return Measurement{}, err
	}
	var before, after CommandStats
	snap := func(into *CommandStats) func() error {
		return func() error {
			st, err := ReadCommandStats(ctx, addr)
			*into = st
			return err
		}
	}
	var r Result
	var procCounts []int
	if s.Procs == 0 {
		set, err := openWarm(ctx, cfg, addr, lockName, s.Handles, p.Duration+time.Minute)
		if err != nil {
			return Measurement{}, err
		}
		defer set.Close()
		if err := snap(&before)(); err != nil {
			return Measurement{}, err
		}
		var inside atomic.Int32
		r = Contend(ctx, set.Handles, p, time.Now(), &inside)
		if err := snap(&after)(); err != nil {
			return Measurement{}, err
		}
	} else {
		if s.Handles%s.Procs != 0 {
			return Measurement{}, fmt.Errorf("%d handles do not divide over %d processes", s.Handles, s.Procs)
		}
		spec := WorkerSpec{Config: cfg.Name, Addr: addr, Name: lockName, Handles: s.Handles / s.Procs, Params: p}
		rs, err := RunWorkers(ctx, exe, spec, s.Procs, snap(&before), snap(&after))
		if err != nil {
			return Measurement{}, err
		}
		r = Merge(rs...)
		for _, x := range rs {
			procCounts = append(procCounts, x.Acquisitions())
		}
	}
	// The in-process counter and the intervals see the same overlaps; the
	// intervals also see those between processes.
	r.Overlaps = max(r.Overlaps, Overlaps(r.Intervals))
	delta := after.Delta(before)
	calls, all := delta.Counts(cfg.Library)
	return Measurement{Result: r, Duration: p.Duration, Calls: calls, AllCalls: all, ProcCounts: procCounts, Commands: delta}, nil
}

// Rate is acquisitions per second.
func (m Measurement) Rate() float64 {
	return float64(m.Acquisitions()) / m.Duration.Seconds()
}
