// Command chaos is golocker's fault-injection run (make chaos): worker
// processes contend for locks through the public API on a real backend
// while the coordinator injects faults, and the history is checked.
//
//	go run ./chaos -duration 60s -runs 3                  # every backend, as make chaos
//	go run ./chaos -duration 15s -backends redis,etcd     # some backends
//	go run ./chaos -table chaos/results/latest             # the table of docs/reliability.md
//
// Each run starts the backend's servers (internal/testserver), a fenced
// resource on loopback, and -workers worker processes (this program again,
// with the hidden first argument "worker"). A worker goes round: Lock one
// of the names (one name for the lock workload, three for lock-set), a
// fenced read-modify-write of the name's counter, Unlock, and reports each
// step as a JSON line. Faults, one at a time, at random with the printed
// seed: SIGSTOP a worker past its lease, SIGKILL one (another starts),
// stall, delay or cut its connections (a TCP proxy per worker over
// conformance.FaultNet), kill and restart the server, the etcd or
// ZooKeeper leader, or the Redis primary (failover).
//
// The check (check.go): holds must not overlap unless the earlier holder's
// lease may have ended (a fault stopped its renewals); tokens increase in
// real-time order; the fence sees no lost update; porcupine checks the
// history against a model of a lock with leases. One summary line per run;
// the exit status is 1 if any run has an unexplained violation or failed.
// docs/reliability.md explains the method and the figures.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == workerCmd {
		if err := runWorker(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "chaos worker: %v\n", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(coordinate(os.Args[1:]))
}

func coordinate(args []string) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	duration := fs.Duration("duration", 20*time.Second, "length of one run, after the servers and workers are up")
	runs := fs.Int("runs", 1, "runs of each backend")
	list := fs.String("backends", "all", "comma-separated backends, or all: "+strings.Join(backendNames(), ","))
	workers := fs.Int("workers", 4, "worker processes")
	ttl := fs.Duration("ttl", 2*time.Second, "lease (whole seconds: etcd's session TTL)")
	seed := fs.Uint64("seed", 0, "random seed; 0 picks one from the clock")
	workload := fs.String("workload", "mixed", "lock (one name), lock-set (three names) or mixed (alternate per run)")
	outDir := fs.String("out", "", "directory for one JSON file per run (none if empty)")
	verbose := fs.Bool("v", false, "show the workers' errors and the explained violations")
	faultKinds := fs.String("faults", "", "comma-separated fault kinds to inject (pause, kill, stall, latency, cut, restart, leader, failover); empty: all")
	recheckDir := fs.String("recheck", "", "check the runs saved in this directory (-out) again, rewrite their JSON files, and exit")
	table := fs.String("table", "", "print the table of docs/reliability.md from the JSON files in this directory, and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *recheckDir != "" {
		n, err := recheck(os.Stdout, *recheckDir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
			return 1
		}
		if n > 0 {
			return 1
		}
		return 0
	}
	if *table != "" {
		if err := printTable(os.Stdout, *table); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
			return 1
		}
		return 0
	}
	if *ttl%time.Second != 0 || *ttl <= 0 || *workers < 2 || *runs < 1 || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "chaos: -ttl must be whole seconds, -workers at least 2, -runs at least 1, -duration positive")
		return 2
	}
	var specs []backendSpec
	if *list == "all" {
		specs = backends
	} else {
		for _, n := range strings.Split(*list, ",") {
			i := slices.IndexFunc(backends, func(b backendSpec) bool { return b.name == strings.TrimSpace(n) })
			if i < 0 {
				fmt.Fprintf(os.Stderr, "chaos: unknown backend %q (have %s)\n", n, strings.Join(backendNames(), ", "))
				return 2
			}
			specs = append(specs, backends[i])
		}
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano() % 1_000_000)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		return 1
	}
	if *outDir != "" {
		if err := os.MkdirAll(*outDir, 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
			return 1
		}
	}
	// SIGINT or SIGTERM ends the current run early (its servers and
	// workers are cleaned up) and the program after it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	status := 0
	for _, spec := range specs {
		for run := 1; run <= *runs && ctx.Err() == nil; run++ {
			names := []string{"chaos-k0"}
			if *workload == "lock-set" || (*workload == "mixed" && run%2 == 0) {
				names = []string{"chaos-k0", "chaos-k1", "chaos-k2"}
			}
			cfg := runConfig{duration: *duration, workers: *workers, names: names, ttl: *ttl,
				seed: *seed + uint64(run) - 1, self: self, verbose: *verbose}
			if *faultKinds != "" {
				cfg.kinds = strings.Split(*faultKinds, ",")
			}
			started := time.Now()
			res := runBackend(ctx, spec, run, cfg)
			fmt.Println(summary(res, time.Since(started)))
			for _, v := range res.Violations {
				if v.Explained == "" {
					fmt.Printf("  VIOLATION %s: %s\n", v.Kind, v.Detail)
				} else if *verbose {
					fmt.Printf("  explained (%s) %s: %s\n", v.Explained, v.Kind, v.Detail)
				}
			}
			if res.Error != "" || res.Unexplained > 0 || (res.Skipped != "" && serversRequired()) {
				status = 1
			}
			if *outDir != "" {
				b, _ := json.MarshalIndent(res, "", "  ")
				p := filepath.Join(*outDir, fmt.Sprintf("%s-run%d.json", spec.name, run))
				var hist []byte
				for _, e := range res.history {
					l, _ := json.Marshal(e)
					hist = append(append(hist, l...), '\n')
				}
				hp := filepath.Join(*outDir, fmt.Sprintf("%s-run%d.history", spec.name, run))
				if err := errors.Join(os.WriteFile(p, append(b, '\n'), 0o644), os.WriteFile(hp, hist, 0o644)); err != nil {
					fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
					status = 1
				}
			}
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "chaos: interrupted")
		return 1
	}
	return status
}

func backendNames() []string {
	var n []string
	for _, b := range backends {
		n = append(n, b.name)
	}
	return n
}

// summary is the run's one line.
func summary(r *runResult, took time.Duration) string {
	head := fmt.Sprintf("chaos %s (run %d, %s):", r.Backend, r.Run, workloadName(r.Names))
	if r.Skipped != "" {
		return fmt.Sprintf("%s SKIPPED: %s", head, r.Skipped)
	}
	var kinds []string
	total := 0
	for k, n := range r.Faults {
		kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
		total += n
	}
	sort.Slice(kinds, func(i, j int) bool { return kindOf(kinds[i]) < kindOf(kinds[j]) })
	explained := map[string]int{}
	nExpl := 0
	for _, v := range r.Violations {
		if v.Explained != "" {
			explained[v.Explained]++
			nExpl++
		}
	}
	var ex []string
	for k, n := range explained {
		ex = append(ex, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(ex)
	exs := ""
	if nExpl > 0 {
		exs = fmt.Sprintf(" (%d explained: %s)", nExpl, strings.Join(ex, ", "))
	}
	line := fmt.Sprintf("%s %d acquisitions, %d faults (%s), %d violations%s, linearizable %s, writes %d accepted %d refused (+%d reads), %d lost updates, free-after-death %s, unavailable after %s %s, seed %d, %s",
		head, r.Acquisitions, total, strings.Join(kinds, ", "), r.Unexplained, exs, strings.ToLower(r.Linearizable),
		r.Fence.Accepted, r.Fence.Refused, r.Fence.ReadsRefused, r.Fence.LostUpdates,
		durStats(r.free), serverFaultName(r), durStats(r.unav), r.Seed, tookOr(took))
	if r.Error != "" {
		line += "; ERROR: " + r.Error
	}
	return line
}

func workloadName(names int) string {
	if names == 1 {
		return "lock"
	}
	return "lock-set"
}

func serverFaultName(r *runResult) string {
	if r.ServerFault == "" {
		return "server fault (none)"
	}
	return map[string]string{fRestart: "server restart", fLeader: "leader kill", fFailover: "failover"}[r.ServerFault]
}

// durStats formats p50 and max of ds, or "—".
func durStats(ds []time.Duration) string { return formatP50Max("p50 %s max %s (n=%d)", ds) }

// formatP50Max formats the p50 and the max of ds, rounded to 10ms, and
// their number with format, or returns "—" when there are none.
func formatP50Max(format string, ds []time.Duration) string {
	if len(ds) == 0 {
		return "—"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf(format, s[len(s)/2].Round(10*time.Millisecond), s[len(s)-1].Round(10*time.Millisecond), len(s))
}

func serversRequired() bool {
	switch strings.ToLower(os.Getenv("LOCKER_REQUIRE_SERVERS")) {
	case "1", "true", "yes":
		return true
	}
	return false
}

func tookOr(d time.Duration) string {
	if d == 0 {
		return "rechecked"
	}
	return d.Round(time.Second).String()
}

// kindOf returns the kind of a "N kind" count, to sort counts by kind.
func kindOf(count string) string {
	_, k, _ := strings.Cut(count, " ")
	return k
}
