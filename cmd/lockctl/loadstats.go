package main

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// loadSecond is one second of a load run: the raw series of the report.
type loadSecond struct {
	T              int     `json:"t"` // seconds since the start
	Acquisitions   int     `json:"acquisitions"`
	WaitP50        float64 `json:"wait_p50_ms"`
	WaitP90        float64 `json:"wait_p90_ms"`
	WaitP99        float64 `json:"wait_p99_ms"`
	WaitMax        float64 `json:"wait_max_ms"`
	Handoffs       int     `json:"handoffs"`
	HandoffP50     float64 `json:"handoff_p50_ms"`
	HandoffP99     float64 `json:"handoff_p99_ms"`
	Renewals       int64   `json:"renewals"`
	RenewalErrors  int64   `json:"renewal_errors"`
	Lost           int64   `json:"lost"`
	FencedAccepted int     `json:"fenced_accepted"`
	FencedRefused  int     `json:"fenced_refused"`
	Errors         int64   `json:"errors"`
	Dropped        int64   `json:"dropped"`
}

// loadSummary is a load run in figures.
type loadSummary struct {
	Scenario        string     `json:"scenario"`
	Backend         string     `json:"backend"`
	Started         string     `json:"started"`
	Seconds         float64    `json:"seconds"`
	Workers         int        `json:"workers"`
	Handles         int        `json:"handles"`
	Cores           int        `json:"cores"`
	Acquisitions    int        `json:"acquisitions"`
	Throughput      float64    `json:"throughput_per_s"`
	WaitP50         float64    `json:"wait_p50_ms"`
	WaitP90         float64    `json:"wait_p90_ms"`
	WaitP99         float64    `json:"wait_p99_ms"`
	WaitMax         float64    `json:"wait_max_ms"`
	Handoffs        int        `json:"handoffs"`
	HandoffMean     float64    `json:"handoff_mean_ms"`
	HandoffP50      float64    `json:"handoff_p50_ms"`
	HandoffP99      float64    `json:"handoff_p99_ms"`
	Renewals        int64      `json:"renewals"`
	RenewalErrors   int64      `json:"renewal_errors"`
	Lost            int64      `json:"lost"`
	Faults          []faultRec `json:"faults"`
	FencedAccepted  int        `json:"fenced_accepted"`
	FencedRefused   int        `json:"fenced_refused"`
	FenceOutOfOrder int        `json:"fence_out_of_order"`
	// Overlaps counts holds that began before another hold of the same
	// name, not lost, had ended: a breach of mutual exclusion.
	Overlaps   int      `json:"overlaps"`
	HTTPFailed int      `json:"http_failed"`
	Errors     int      `json:"errors"`
	Dropped    int64    `json:"dropped"`
	FirstError []string `json:"first_errors,omitempty"`
	// WorkerFailures are the workers that exited with an error (a killed
	// worker is not one).
	WorkerFailures []string `json:"worker_failures,omitempty"`
}

// loadReport is what report.html, series.json and series.csv show.
type loadReport struct {
	Summary  loadSummary  `json:"summary"`
	Scenario *scenario    `json:"scenario"`
	Series   []loadSecond `json:"series"`

	startNanos int64 // the run's start, Unix nanoseconds
}

// pct returns the p-th quantile (nearest rank) of sorted values.
func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// report turns the records into the series and the summary.
func (co *coordinator) report() *loadReport {
	s := co.s
	start := co.start.UnixNano()
	n := int(math.Ceil(s.Duration.std().Seconds()))
	sec := func(t int64) int { return max(0, min(n-1, int((t-start)/1e9))) }
	waits := make([][]float64, n)
	gaps := make([][]float64, n)
	series := make([]loadSecond, n)
	for i := range series {
		series[i].T = i
	}
	sum := loadSummary{
		Scenario: s.Name, Backend: co.shown, Started: co.start.UTC().Format(time.RFC3339),
		Seconds: s.Duration.std().Seconds(), Workers: s.Workers, Handles: s.Handles, Cores: runtime.NumCPU(),
		Faults: co.faults, Errors: co.nerrs, FirstError: co.errs, WorkerFailures: co.workerExitErrors,
	}
	var allWaits, allGaps []float64
	byName := map[int][]loadRec{}
	for _, h := range co.holds {
		if h.S != 0 {
			sum.HTTPFailed++
			continue
		}
		i := sec(h.A)
		if h.Q != 0 { // a killed holder's hold has no wait of its own
			series[i].Acquisitions++
			w := ms(h.A - h.Q)
			waits[i] = append(waits[i], w)
			allWaits = append(allWaits, w)
		}
		switch h.F {
		case fenceAccepted:
			series[i].FencedAccepted++
		case fenceRefused:
			series[i].FencedRefused++
		}
		byName[h.N] = append(byName[h.N], h)
	}
	for _, hs := range byName {
		slices.SortFunc(hs, func(a, b loadRec) int { return cmp.Compare(a.A, b.A) })
		var maxR int64 // the latest end of a hold that was not lost
		for j, h := range hs {
			if h.A < maxR {
				sum.Overlaps++
			}
			if j > 0 {
				prev := hs[j-1]
				switch {
				case prev.L:
					// The time the name sat with a dead or frozen owner:
					// from the end of the work it would have done.
					end := prev.A + s.Hold.std().Nanoseconds()
					if h.A > end {
						g := ms(h.A - end)
						gaps[sec(h.A)] = append(gaps[sec(h.A)], g)
						allGaps = append(allGaps, g)
					}
				case h.Q != 0 && h.Q <= prev.R:
					// h waited when prev released: a hand-off.
					g := ms(max(0, h.A-prev.R))
					gaps[sec(h.A)] = append(gaps[sec(h.A)], g)
					allGaps = append(allGaps, g)
				}
			}
			if !h.L {
				maxR = max(maxR, h.R)
			}
		}
	}
	for i := range series {
		slices.Sort(waits[i])
		slices.Sort(gaps[i])
		series[i].WaitP50, series[i].WaitP90 = pct(waits[i], .5), pct(waits[i], .9)
		series[i].WaitP99, series[i].WaitMax = pct(waits[i], .99), pct(waits[i], 1)
		series[i].Handoffs = len(gaps[i])
		series[i].HandoffP50, series[i].HandoffP99 = pct(gaps[i], .5), pct(gaps[i], .99)
	}
	for _, c := range co.counters {
		i := sec(c.At - 5e8) // a tick counts the second before it
		series[i].Renewals += c.Ren
		series[i].RenewalErrors += c.RErr
		series[i].Lost += c.Lost
		series[i].Errors += c.Err
		series[i].Dropped += c.Drop
	}
	for _, f := range co.faults {
		if f.Kind == "kill" {
			series[sec(f.At)].Lost++
		}
	}
	slices.Sort(allWaits)
	slices.Sort(allGaps)
	for _, x := range series {
		sum.Acquisitions += x.Acquisitions
		sum.Renewals += x.Renewals
		sum.RenewalErrors += x.RenewalErrors
		sum.Lost += x.Lost
		sum.FencedAccepted += x.FencedAccepted
		sum.FencedRefused += x.FencedRefused
		sum.Dropped += x.Dropped
	}
	sum.Throughput = float64(sum.Acquisitions) / s.Duration.std().Seconds()
	sum.WaitP50, sum.WaitP90, sum.WaitP99, sum.WaitMax = pct(allWaits, .5), pct(allWaits, .9), pct(allWaits, .99), pct(allWaits, 1)
	sum.Handoffs, sum.HandoffP50, sum.HandoffP99 = len(allGaps), pct(allGaps, .5), pct(allGaps, .99)
	for _, g := range allGaps {
		sum.HandoffMean += g / float64(len(allGaps))
	}
	if s.Fenced {
		sum.FenceOutOfOrder = fenceOutOfOrder(co.fence + ".log")
	}
	return &loadReport{Summary: sum, Scenario: s, Series: series, startNanos: start}
}

// fenceOutOfOrder counts the accepted writes of the fence's log whose
// token is below an earlier accepted one of the same name (-1 when the log
// cannot be read).
func fenceOutOfOrder(path string) int {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return 0
		}
		return -1
	}
	defer f.Close()
	highest := map[string]uint64{}
	bad := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, tok, ok := strings.Cut(sc.Text(), " ")
		t, err := strconv.ParseUint(tok, 10, 64)
		if !ok || err != nil {
			return -1
		}
		if t < highest[name] {
			bad++
		}
		highest[name] = max(highest[name], t)
	}
	return bad
}

// countFaults counts the SIGKILLs and the SIGSTOPs among faults.
func countFaults(faults []faultRec) (kills, stops int) {
	for _, f := range faults {
		if f.Kind == "kill" {
			kills++
		} else {
			stops++
		}
	}
	return kills, stops
}

// write writes report.html, series.json and series.csv into dir.
func (r *loadReport) write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "series.json"), b, 0o644); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "series.csv"), r.writeCSV); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, "report.html"), r.writeHTML)
}

// writeFile creates the file at path and has write fill it.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (r *loadReport) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"t", "acquisitions", "wait_p50_ms", "wait_p90_ms", "wait_p99_ms", "wait_max_ms",
		"handoffs", "handoff_p50_ms", "handoff_p99_ms", "renewals", "renewal_errors", "lost",
		"fenced_accepted", "fenced_refused", "errors", "dropped"})
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	i := strconv.Itoa
	i64 := func(x int64) string { return strconv.FormatInt(x, 10) }
	for _, s := range r.Series {
		_ = cw.Write([]string{i(s.T), i(s.Acquisitions), f(s.WaitP50), f(s.WaitP90), f(s.WaitP99), f(s.WaitMax),
			i(s.Handoffs), f(s.HandoffP50), f(s.HandoffP99), i64(s.Renewals), i64(s.RenewalErrors), i64(s.Lost),
			i(s.FencedAccepted), i(s.FencedRefused), i64(s.Errors), i64(s.Dropped)})
	}
	cw.Flush()
	return cw.Error()
}

// printSummary prints the summary on the terminal.
func (r *loadReport) printSummary(w io.Writer) {
	s := r.Summary
	fmt.Fprintf(w, "acquisitions   %d in %.0fs (%.0f/s)\n", s.Acquisitions, s.Seconds, s.Throughput)
	fmt.Fprintf(w, "wait           p50 %.2fms  p90 %.2fms  p99 %.2fms  max %.2fms\n", s.WaitP50, s.WaitP90, s.WaitP99, s.WaitMax)
	fmt.Fprintf(w, "hand-off gap   p50 %.2fms  p99 %.2fms  mean %.2fms  (%d hand-offs)\n", s.HandoffP50, s.HandoffP99, s.HandoffMean, s.Handoffs)
	fmt.Fprintf(w, "renewals       %d (%.0f/s), %d failed\n", s.Renewals, float64(s.Renewals)/s.Seconds, s.RenewalErrors)
	fmt.Fprintf(w, "lost holds     %d\n", s.Lost)
	if len(s.Faults) > 0 {
		kills, stops := countFaults(s.Faults)
		fmt.Fprintf(w, "faults         %d SIGKILL, %d SIGSTOP\n", kills, stops)
	}
	if r.Scenario.Fenced {
		fmt.Fprintf(w, "fenced writes  %d accepted, %d refused, %d out of order\n", s.FencedAccepted, s.FencedRefused, s.FenceOutOfOrder)
	}
	if r.Scenario.Mode == "http" {
		fmt.Fprintf(w, "http           %d requests failed, %d dropped (too many in flight)\n", s.HTTPFailed, s.Dropped)
	}
	fmt.Fprintf(w, "exclusion      %d overlapping holds\n", s.Overlaps)
	if s.Errors > 0 || len(s.FirstError) > 0 {
		fmt.Fprintf(w, "errors         %d\n", s.Errors)
		for _, e := range s.FirstError {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	for _, f := range s.WorkerFailures {
		fmt.Fprintf(w, "worker failed  %s\n", f)
	}
}
