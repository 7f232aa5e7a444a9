// Command table prints the benchmark results of package bench as Markdown
// tables: the median of every metric over the runs (-count), its spread,
// golocker's ratios to the best peer configuration, and the issue's
// targets, met or not.
//
//	go run ./cmd/table [-hold 1ms] results/latest.txt
//
// It reads the raw output of `go test -bench` (standard input when no file
// is named). ns/op comparisons are benchstat's job; this is for the custom
// metrics.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	hold := flag.Duration("hold", time.Millisecond, "the hold of the contended runs: the ideal rate is 1/hold")
	flag.Parse()
	var in []io.Reader
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "table:", err)
			os.Exit(1)
		}
		defer f.Close()
		in = append(in, f)
	}
	if len(in) == 0 {
		in = append(in, os.Stdin)
	}
	res, err := parse(io.MultiReader(in...))
	if err != nil {
		fmt.Fprintln(os.Stderr, "table:", err)
		os.Exit(1)
	}
	if len(res.names) == 0 {
		fmt.Fprintln(os.Stderr, "table: no benchmark results in the input")
		os.Exit(1)
	}
	write(os.Stdout, res, 1/hold.Seconds())
}

// results is every value of every metric of every benchmark, in the order
// of the runs.
type results struct {
	config []string                        // "key: value" lines
	names  []string                        // benchmark names, first seen first, without the -GOMAXPROCS suffix
	values map[string]map[string][]float64 // name → unit → one value per run
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

func parse(r io.Reader) (*results, error) {
	res := &results{values: map[string]map[string][]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.Contains(k, " ") && !strings.HasPrefix(k, "Benchmark") {
			if c := k + ": " + v; !slices.Contains(res.config, c) {
				res.config = append(res.config, c)
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procsSuffix.ReplaceAllString(f[0], "")
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%q: %v", line, err)
			}
			// A unit LIBRARY:UNIT is a figure of one of several libraries
			// measured in one benchmark (BenchmarkBackendUncontended):
			// it makes a row of its own, NAME/LIBRARY.
			row, unit := name, f[i+1]
			if lib, u, ok := strings.Cut(unit, ":"); ok {
				row, unit = name+"/"+lib, u
			} else if len(f) > 4 && unit == "ns/op" && v == 0 {
				continue
			}
			m := res.values[row]
			if m == nil {
				m = map[string][]float64{}
				res.values[row] = m
				res.names = append(res.names, row)
			}
			m[unit] = append(m[unit], v)
		}
	}
	return res, sc.Err()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// spread is (max − min) / median, in percent.
func spread(xs []float64) float64 {
	m := median(xs)
	if len(xs) < 2 || m == 0 {
		return 0
	}
	return 100 * (slices.Max(xs) - slices.Min(xs)) / m
}

func (r *results) med(name, unit string) float64 { return median(r.values[name][unit]) }

// contended is one row of the contended table.
type contended struct {
	name, scenario, config string
	golocker               bool
}

func (r *results) contended() (rows []contended, scenarios []string) {
	for _, n := range r.names {
		rest, ok := strings.CutPrefix(n, "BenchmarkContended/")
		if !ok {
			continue
		}
		i := strings.LastIndex(rest, "/")
		if i < 0 {
			continue
		}
		c := contended{name: n, scenario: rest[:i], config: rest[i+1:]}
		c.golocker = strings.HasPrefix(c.config, "golocker")
		rows = append(rows, c)
		if !slices.Contains(scenarios, c.scenario) {
			scenarios = append(scenarios, c.scenario)
		}
	}
	return rows, scenarios
}

// best returns the peer row of scenario with the highest median of unit
// (or lowest, when low).
func (r *results) best(rows []contended, scenario, unit string, low bool) (contended, bool) {
	var b contended
	found := false
	for _, c := range rows {
		if c.golocker || c.scenario != scenario {
			continue
		}
		v := r.med(c.name, unit)
		if !found || (low && v < r.med(b.name, unit)) || (!low && v > r.med(b.name, unit)) {
			b, found = c, true
		}
	}
	return b, found
}

// pairedRatios divides a's values by b's run by run: the spread of a ratio
// over runs is the noise that matters for a comparison.
func (r *results) pairedRatios(a, b, unit string) []float64 {
	x, y := r.values[a][unit], r.values[b][unit]
	var out []float64
	for i := range min(len(x), len(y)) {
		if y[i] != 0 {
			out = append(out, x[i]/y[i])
		}
	}
	return out
}

func ratioCell(rs []float64) string {
	if len(rs) == 0 {
		return "–"
	}
	if len(rs) == 1 {
		return fmt.Sprintf("%.2f×", rs[0])
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", median(rs), slices.Min(rs), slices.Max(rs))
}

func write(w io.Writer, r *results, ideal float64) {
	if len(r.config) > 0 {
		fmt.Fprintln(w, "```")
		for _, c := range r.config {
			fmt.Fprintln(w, c)
		}
		fmt.Fprintln(w, "```")
		fmt.Fprintln(w)
	}
	runs := func(prefix string) int {
		n := 0
		for _, name := range r.names {
			if strings.HasPrefix(name, prefix) {
				for _, v := range r.values[name] {
					n = max(n, len(v))
				}
			}
		}
		return n
	}
	uncontended, contended := runs("BenchmarkUncontended"), runs("BenchmarkContended")
	if uncontended == 0 && contended == 0 {
		uncontended, contended = runs(backendUncontended), runs(backendContended)
	}
	fmt.Fprintf(w, "Medians of %d uncontended and %d contended run(s) of each benchmark; ± is the spread (max − min) / median over the runs; ratios are taken run by run and given as median (min–max).\n\n",
		uncontended, contended)
	writeUncontended(w, r)
	if rows, scenarios := r.contended(); len(rows) > 0 {
		writeContended(w, r, rows, ideal)
		writeRatios(w, r, rows, scenarios)
		writeTargets(w, r, rows, scenarios, ideal)
	}
	writeBackends(w, r, ideal)
}

func writeUncontended(w io.Writer, r *results) {
	const bsm = "BenchmarkUncontended/bsmredislock"
	var names []string
	for _, n := range r.names {
		if strings.HasPrefix(n, "BenchmarkUncontended/") || n == interleaved {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == interleaved })
	fmt.Fprintln(w, "### Uncontended Lock+Unlock")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| library | mean µs | p50 µs | p99 µs | p50 ÷ bsm/redislock's |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|")
	for _, n := range names {
		v := r.values[n]
		fmt.Fprintf(w, "| %s | %.0f ±%.0f%% | %.0f ±%.0f%% | %.0f ±%.0f%% | %s |\n",
			strings.TrimPrefix(n, "BenchmarkUncontended/"),
			median(v["ns/op"])/1000, spread(v["ns/op"]), median(v["p50-us"]), spread(v["p50-us"]),
			median(v["p99-us"]), spread(v["p99-us"]), ratioCell(r.pairedRatios(n, bsm, "p50-us")))
	}
	fmt.Fprintln(w)
	v, ok := r.values[interleaved]
	if !ok {
		return
	}
	fmt.Fprintln(w, "Interleaved (the handles take turns in blocks of pairs in one process; golocker-trylock is TryLock+Unlock, golocker-driver redislock's Driver without package locker):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| handle | p50 µs | p99 µs | p50 ÷ bsm/redislock's | p99 ÷ bsm/redislock's |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|")
	for _, lib := range []string{"golocker", "golocker-trylock", "golocker-driver", "redsync", "bsmredislock"} {
		p50, ok := v[lib+"-p50-us"]
		if !ok {
			continue
		}
		p99 := "–"
		if xs, ok := v[lib+"-p99-us"]; ok {
			p99 = fmt.Sprintf("%.1f ±%.0f%%", median(xs), spread(xs))
		}
		fmt.Fprintf(w, "| %s | %.1f ±%.0f%% | %s | %s | %s |\n", lib, median(p50), spread(p50), p99,
			ratioCell(interleavedRatios(v, lib, "p50")), ratioCell(interleavedRatios(v, lib, "p99")))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Targets (the median of the runs' ratios, min–max in brackets):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| target | measured | met |")
	fmt.Fprintln(w, "|---|--:|---|")
	for _, t := range []struct {
		lib, what, q string
		limit        float64
	}{
		{"golocker", "Lock+Unlock", "p50", 1.05},
		{"golocker", "Lock+Unlock", "p99", 1.10},
		{"golocker-trylock", "TryLock+Unlock", "p50", 1.05},
		{"golocker-trylock", "TryLock+Unlock", "p99", 1.10},
	} {
		rs := interleavedRatios(v, t.lib, t.q)
		if len(rs) == 0 {
			continue
		}
		met := "yes"
		if median(rs) > t.limit {
			met = "**no**"
		}
		fmt.Fprintf(w, "| %s %s ≤ %.2f× bsm/redislock's | %s | %s |\n", t.what, t.q, t.limit, ratioCell(rs), met)
	}
	fmt.Fprintln(w)
}

// interleavedRatios returns, run by run, lib's p50 or p99 (q) ÷
// bsm/redislock's in BenchmarkUncontendedInterleaved's values v.
func interleavedRatios(v map[string][]float64, lib, q string) []float64 {
	x, y := v[lib+"-"+q+"-us"], v["bsmredislock-"+q+"-us"]
	var out []float64
	for i := range min(len(x), len(y)) {
		if y[i] != 0 {
			out = append(out, x[i]/y[i])
		}
	}
	return out
}

const interleaved = "BenchmarkUncontendedInterleaved"

func writeContended(w io.Writer, r *results, rows []contended, ideal float64) {
	fmt.Fprintf(w, "### Contended (ideal rate 1/hold = %.0f acq/s)\n\n", ideal)
	fmt.Fprintln(w, "| scenario | config | acq/s | × ideal | wait p50 ms | wait p99 ms | wait max ms | Jain | Jain over procs | cmds/acq | all cmds/acq | hold ms | gap ms | gap p50 ms |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, c := range rows {
		v := r.values[c.name]
		cfg := c.config
		if c.golocker {
			cfg = "**" + cfg + "**"
		}
		cell := func(unit, format string) string { return cellOf(v, unit, format) }
		fmt.Fprintf(w, "| %s | %s | %.0f ±%.0f%% | %.2f | %s | %.1f ±%.0f%% | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			c.scenario, cfg, median(v["acq/s"]), spread(v["acq/s"]), median(v["acq/s"])/ideal,
			cell("p50-ms", "%.2f"), median(v["p99-ms"]), spread(v["p99-ms"]), cell("max-ms", "%.0f"),
			cell("jain", "%.3f"), cell("jain-procs", "%.3f"), cell("cmds/acq", "%.2f"), cell("allcmds/acq", "%.1f"),
			cell("hold-ms", "%.3f"), cell("gap-ms", "%.3f"), cell("gap-p50-ms", "%.3f"))
	}
	fmt.Fprintln(w)
}

func writeRatios(w io.Writer, r *results, rows []contended, scenarios []string) {
	fmt.Fprintln(w, "### golocker ÷ the best peer configuration")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Best peer by median throughput, and (separately) by median wait p99. Throughput: higher is better; p99: lower is better.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | golocker | best peer (acq/s) | throughput ratio | best peer (p99) | p99 ratio |")
	fmt.Fprintln(w, "|---|---|---|--:|---|--:|")
	for _, s := range scenarios {
		bt, ok1 := r.best(rows, s, "acq/s", false)
		bp, ok2 := r.best(rows, s, "p99-ms", true)
		if !ok1 || !ok2 {
			continue
		}
		for _, c := range rows {
			if !c.golocker || c.scenario != s {
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s (%.0f) | %s | %s (%.1f ms) | %s |\n", s, c.config,
				bt.config, r.med(bt.name, "acq/s"), ratioCell(r.pairedRatios(c.name, bt.name, "acq/s")),
				bp.config, r.med(bp.name, "p99-ms"), ratioCell(r.pairedRatios(c.name, bp.name, "p99-ms")))
		}
	}
	fmt.Fprintln(w)
}

func writeTargets(w io.Writer, r *results, rows []contended, scenarios []string, ideal float64) {
	fmt.Fprintln(w, "### The issue's targets (medians)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| target | scenario | golocker | measured | met |")
	fmt.Fprintln(w, "|---|---|---|--:|---|")
	row := func(target, scenario, cfg, measured string, ok bool) {
		m := "yes"
		if !ok {
			m = "**no**"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", target, scenario, cfg, measured, m)
	}
	for _, s := range scenarios {
		bt, ok := r.best(rows, s, "acq/s", false)
		for _, c := range rows {
			if !c.golocker || c.scenario != s {
				continue
			}
			rate := r.med(c.name, "acq/s")
			if ok {
				ratio := rate / r.med(bt.name, "acq/s")
				row("throughput ≥ 1.3× best peer", s, c.config, fmt.Sprintf("%.2f× (%s)", ratio, bt.config), ratio >= 1.3)
			}
			row("throughput ≥ 0.8 × ideal", s, c.config, fmt.Sprintf("%.2f (%.0f/s)", rate/ideal, rate), rate/ideal >= 0.8)
			limit := 150.0
			if strings.HasPrefix(s, "handles=8/") {
				limit = 50
			}
			p99 := r.med(c.name, "p99-ms")
			row(fmt.Sprintf("wait p99 ≤ %.0f ms", limit), s, c.config, fmt.Sprintf("%.1f ms", p99), p99 <= limit)
			j := r.med(c.name, "jain")
			row("Jain ≥ 0.95", s, c.config, fmt.Sprintf("%.3f", j), j >= 0.95)
			switch s {
			case "handles=32/procs=1", "handles=32/procs=4":
				limit := 5.0
				if s == "handles=32/procs=4" {
					limit = 8
				}
				n := r.med(c.name, "cmds/acq")
				row(fmt.Sprintf("≤ %.0f commands sent per acquisition", limit), s, c.config, fmt.Sprintf("%.2f (%.1f with the scripts')", n, r.med(c.name, "allcmds/acq")), n <= limit)
			}
		}
	}
	g, b := "BenchmarkUncontended/golocker", "BenchmarkUncontended/bsmredislock"
	if _, ok := r.values[g]; ok {
		if _, ok := r.values[b]; ok {
			ratio := r.med(g, "p50-us") / r.med(b, "p50-us")
			row("uncontended p50 ≤ 1.2× bsm/redislock's", "uncontended, separate runs", "golocker", fmt.Sprintf("%.2f× (%.0f vs %.0f µs)", ratio, r.med(g, "p50-us"), r.med(b, "p50-us")), ratio <= 1.2)
		}
	}
	fmt.Fprintln(w)
}
