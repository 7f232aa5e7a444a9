package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// printTable reads the JSON files of a results directory (-out) and prints
// the table of docs/reliability.md: one row per backend, over its runs.
func printTable(w io.Writer, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no results in %s", dir)
	}
	by := map[string][]*runResult{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r runResult
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		by[r.Backend] = append(by[r.Backend], &r)
	}
	fmt.Fprintln(w, "| backend | runs × length | acquisitions | faults injected | violations (explained) | linearizable | writes accepted / refused | free after holder's death p50 / max | unavailable after server fault p50 / max |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, spec := range backends {
		rs := by[spec.name]
		if len(rs) == 0 {
			continue
		}
		acq, unexpl, expl, acc, ref := 0, 0, 0, 0, 0
		faults := map[string]int{}
		var free, unav []time.Duration
		lin := map[string]int{}
		for _, r := range rs {
			acq += r.Acquisitions
			unexpl += r.Unexplained
			expl += len(r.Violations) - r.Unexplained
			acc += r.Fence.Accepted
			ref += r.Fence.Refused + r.Fence.ReadsRefused
			for k, n := range r.Faults {
				faults[k] += n
			}
			lin[strings.ToLower(r.Linearizable)]++
			free = append(free, parseDurs(r.FreeAfter)...)
			unav = append(unav, parseDurs(r.Unavailable)...)
			if r.Error != "" || r.Skipped != "" {
				lin["error"]++
			}
		}
		total := 0
		var kinds []string
		for k, n := range faults {
			total += n
			kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
		}
		sort.Slice(kinds, func(i, j int) bool { return kindOf(kinds[i]) < kindOf(kinds[j]) })
		var lins []string
		for k, n := range lin {
			lins = append(lins, fmt.Sprintf("%s %d/%d", k, n, len(rs)))
		}
		sort.Strings(lins)
		fmt.Fprintf(w, "| %s | %d × %s | %d | %d (%s) | %d (%d) | %s | %d / %d | %s | %s |\n",
			spec.name, len(rs), rs[0].Duration, acq, total, strings.Join(kinds, ", "), unexpl, expl,
			strings.Join(lins, ", "), acc, ref, p50max(free), p50max(unav))
	}
	return nil
}

func parseDurs(ss []string) []time.Duration {
	var out []time.Duration
	for _, s := range ss {
		if d, err := time.ParseDuration(s); err == nil {
			out = append(out, d)
		}
	}
	return out
}

func p50max(ds []time.Duration) string { return formatP50Max("%s / %s (n=%d)", ds) }

// recheck runs the check again on every run of a results directory (its
// .history and .json files), rewrites the JSON files and prints each run's
// summary line: a change of the check applies to runs already made.
func recheck(w io.Writer, dir string) (unexplained int, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return 0, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		var r runResult
		if err := json.Unmarshal(b, &r); err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
		hb, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".history")
		if err != nil {
			return 0, err
		}
		var events []event
		for _, l := range strings.Split(strings.TrimSpace(string(hb)), "\n") {
			var e event
			if l != "" {
				if err := json.Unmarshal([]byte(l), &e); err != nil {
					return 0, fmt.Errorf("%s: %w", f, err)
				}
				events = append(events, e)
			}
		}
		ttl, err := time.ParseDuration(r.TTL)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
		r.history = events
		// Runs made before server faults named the name they hit only
		// on Cluster named one for every backend.
		if r.Backend != "redis-cluster" {
			for i := range r.FaultLog {
				if serverFault(r.FaultLog[i].Kind) {
					r.FaultLog[i].Name = ""
				}
			}
		}
		r.fill(check(events, r.FaultLog, ttl, r.Fence, 60*time.Second))
		unexplained += r.Unexplained
		out, _ := json.MarshalIndent(&r, "", "  ")
		if err := os.WriteFile(f, append(out, '\n'), 0o644); err != nil {
			return 0, err
		}
		fmt.Fprintln(w, summary(&r, 0))
	}
	return unexplained, nil
}
