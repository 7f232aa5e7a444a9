package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// The benchmarks of the backends other than Redis:
// BenchmarkBackendUncontended/BACKEND/LIBRARY and
// BenchmarkBackendContended/BACKEND/handles=N/CONFIG. A golocker-X
// configuration is compared with the stock recipe's configuration whose
// name ends in -X, if the backend has one.
const (
	backendUncontended = "BenchmarkBackendUncontended/"
	backendContended   = "BenchmarkBackendContended/"
)

// Targets of the issue for etcd and ZooKeeper against the stock recipe.
const (
	backendRatioTarget = 1.1  // throughput and latency within 1.1× of the stock recipe
	backendJainTarget  = 0.95 // Jain's index with 32 contenders
)

// Targets of golocker's SQL driver against the database's own lock
// (PostgreSQL's advisory locks, MySQL's GET_LOCK), with 8 and 32 handles,
// and of the hot name's hand-off on SQLite and MongoDB.
const (
	nativeRateTarget = 0.8  // acq/s at least 0.8× the native lock's
	nativeP99Target  = 2.0  // wait p99 at most 2× the native lock's
	nativeJainTarget = 0.95 // Jain's index
	gapP50Target     = 2.0  // ms: the median gap between one hold and the next
)

// nativeLocks are the peer libraries that are a database's own lock
// (bench.NativeLocks): their configurations are named LIBRARY-own.
var nativeLocks = []string{"pg-advisory", "mysql-getlock"}

// gapBackends are the backends whose hand-off gap has a target.
var gapBackends = []string{"sqlite", "mongo"}

// native reports whether a peer configuration (or library) is a
// database's own lock.
func native(config string) bool {
	for _, l := range nativeLocks {
		if config == l || strings.HasPrefix(config, l+"-") {
			return true
		}
	}
	return false
}

type backendRow struct {
	name, backend, scenario, config string
}

func (r *results) backendRows() (unc, con []backendRow, backends []string) {
	seen := map[string]bool{}
	for _, n := range r.names {
		var row backendRow
		switch {
		case strings.HasPrefix(n, backendUncontended):
			parts := strings.SplitN(strings.TrimPrefix(n, backendUncontended), "/", 2)
			if len(parts) != 2 {
				continue
			}
			row = backendRow{name: n, backend: parts[0], config: parts[1]}
			unc = append(unc, row)
		case strings.HasPrefix(n, backendContended):
			parts := strings.SplitN(strings.TrimPrefix(n, backendContended), "/", 3)
			if len(parts) != 3 {
				continue
			}
			row = backendRow{name: n, backend: parts[0], scenario: parts[1], config: parts[2]}
			con = append(con, row)
		default:
			continue
		}
		if !seen[row.backend] {
			seen[row.backend] = true
			backends = append(backends, row.backend)
		}
	}
	return unc, con, backends
}

// stockOf returns the stock configuration a golocker configuration is
// compared with: the other library's configuration with the same suffix.
func stockOf(rows []backendRow, g backendRow) (backendRow, bool) {
	if !strings.HasPrefix(g.config, "golocker") {
		return backendRow{}, false
	}
	suffix := strings.TrimPrefix(g.config, "golocker")
	for _, c := range rows {
		if c.backend == g.backend && c.scenario == g.scenario && !strings.HasPrefix(c.config, "golocker") &&
			(suffix == "" || strings.HasSuffix(c.config, suffix)) {
			return c, true
		}
	}
	return backendRow{}, false
}

func writeBackends(w io.Writer, r *results, ideal float64) {
	unc, con, backends := r.backendRows()
	if len(backends) == 0 {
		return
	}
	fmt.Fprintln(w, "### Other backends")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "reqs = requests the server counted (etcd: gRPC messages received, grpc_server_msg_received_total; ZooKeeper: packets received, srvr's Received, session pings included; MySQL: the status variable Questions); – where not counted. Ratios are golocker ÷ the stock recipe with the same sharing of connections (etcd, ZooKeeper), or ÷ the database's own lock with a connection per handle (PostgreSQL: pg-advisory, pg_advisory_lock; MySQL: mysql-getlock, GET_LOCK), which golocker-own (a Client per handle) is compared with; run by run.")
	fmt.Fprintln(w)
	if len(unc) > 0 {
		fmt.Fprintln(w, "#### Uncontended Lock+Unlock")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| backend | library | mean µs | p50 µs | p99 µs | reqs/op | p50 ÷ stock's | mean ÷ stock's |")
		fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|")
		for _, c := range unc {
			v := r.values[c.name]
			p50r, meanr := "–", "–"
			if s, ok := stockOf(unc, c); ok {
				p50r = ratioCell(r.pairedRatios(c.name, s.name, "p50-us"))
				meanr = ratioCell(r.pairedRatios(c.name, s.name, "ns/op"))
			}
			fmt.Fprintf(w, "| %s | %s | %.0f ±%.0f%% | %.0f ±%.0f%% | %.0f ±%.0f%% | %s | %s | %s |\n",
				c.backend, c.config, median(v["ns/op"])/1e3, spread(v["ns/op"]), median(v["p50-us"]), spread(v["p50-us"]),
				median(v["p99-us"]), spread(v["p99-us"]), cellOf(v, "reqs/op", "%.2f"), p50r, meanr)
		}
		fmt.Fprintln(w)
	}
	if len(con) == 0 {
		return
	}
	fmt.Fprintf(w, "#### Contended, in one process (ideal rate 1/hold = %.0f acq/s)\n\n", ideal)
	fmt.Fprintln(w, "| backend | scenario | config | acq/s | wait p50 ms | wait p99 ms | wait max ms | Jain | reqs/acq | hold ms | gap ms | gap p50 ms | acq/s ÷ stock's | p50 ÷ stock's | p99 ÷ stock's |")
	fmt.Fprintln(w, "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, c := range con {
		v := r.values[c.name]
		cfg := c.config
		rate, p50, p99 := "–", "–", "–"
		if strings.HasPrefix(cfg, "golocker") {
			cfg = "**" + cfg + "**"
			if s, ok := stockOf(con, c); ok {
				rate = ratioCell(r.pairedRatios(c.name, s.name, "acq/s"))
				p50 = ratioCell(r.pairedRatios(c.name, s.name, "p50-ms"))
				p99 = ratioCell(r.pairedRatios(c.name, s.name, "p99-ms"))
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.0f ±%.0f%% | %s | %.1f ±%.0f%% | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			c.backend, c.scenario, cfg, median(v["acq/s"]), spread(v["acq/s"]),
			cellOf(v, "p50-ms", "%.2f"), median(v["p99-ms"]), spread(v["p99-ms"]), cellOf(v, "max-ms", "%.0f"),
			cellOf(v, "jain", "%.3f"), cellOf(v, "reqs/acq", "%.2f"),
			cellOf(v, "hold-ms", "%.3f"), cellOf(v, "gap-ms", "%.3f"), cellOf(v, "gap-p50-ms", "%.3f"), rate, p50, p99)
	}
	fmt.Fprintln(w)
	writeBackendTargets(w, r, unc, con)
}

func cellOf(v map[string][]float64, unit, format string) string {
	xs, ok := v[unit]
	if !ok {
		return "–"
	}
	return fmt.Sprintf(format, median(xs))
}

// writeBackendTargets checks the targets where there is a peer.
// Against a stock recipe: throughput ≥ stock's ÷ 1.1, latency
// (uncontended p50, contended wait p50 and p99) ≤ 1.1× stock's, and Jain
// ≥ 0.95 at handles=32. Against a database's own lock: throughput ≥ 0.8×
// native's, wait p99 ≤ 2× native's and Jain ≥ 0.95, at every handle
// count; with them, the median hand-off gap ≤ 2 ms on SQLite and MongoDB.
// The verdict is on the medians of the run-by-run ratios.
func writeBackendTargets(w io.Writer, r *results, unc, con []backendRow) {
	type line struct{ target, where, config, measured, met string }
	var stock, nat []line
	verdict := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	for _, c := range unc {
		if s, ok := stockOf(unc, c); ok && !native(s.config) {
			rs := r.pairedRatios(c.name, s.name, "p50-us")
			m := median(rs)
			stock = append(stock, line{"uncontended p50 ≤ 1.1× stock's", c.backend + " uncontended", c.config,
				fmt.Sprintf("%s (%.0f vs %.0f µs)", ratioCell(rs), r.med(c.name, "p50-us"), r.med(s.name, "p50-us")), verdict(m <= backendRatioTarget)})
		}
	}
	for _, c := range con {
		where := c.backend + " " + c.scenario
		if slices.Contains(gapBackends, c.backend) && strings.HasPrefix(c.config, "golocker") {
			g, ok := r.values[c.name]["gap-p50-ms"]
			nat = append(nat, line{fmt.Sprintf("gap p50 ≤ %.0f ms", gapP50Target), where, c.config,
				cellOf(r.values[c.name], "gap-p50-ms", "%.3f ms"), verdict(ok && median(g) <= gapP50Target)})
		}
		s, ok := stockOf(con, c)
		if !ok {
			continue
		}
		if native(s.config) {
			rs := r.pairedRatios(c.name, s.name, "acq/s")
			nat = append(nat, line{fmt.Sprintf("acq/s ≥ %.1f× native's", nativeRateTarget), where, c.config,
				fmt.Sprintf("%s (%.1f vs %.1f acq/s)", ratioCell(rs), r.med(c.name, "acq/s"), r.med(s.name, "acq/s")),
				verdict(median(rs) >= nativeRateTarget)})
			rs = r.pairedRatios(c.name, s.name, "p99-ms")
			nat = append(nat, line{fmt.Sprintf("wait p99 ≤ %.0f× native's", nativeP99Target), where, c.config,
				fmt.Sprintf("%s (%.2f vs %.2f ms)", ratioCell(rs), r.med(c.name, "p99-ms"), r.med(s.name, "p99-ms")),
				verdict(median(rs) <= nativeP99Target)})
			j := r.med(c.name, "jain")
			nat = append(nat, line{fmt.Sprintf("Jain ≥ %.2f", nativeJainTarget), where, c.config,
				fmt.Sprintf("%.3f (native %.3f)", j, r.med(s.name, "jain")), verdict(j >= nativeJainTarget)})
			continue
		}
		rs := r.pairedRatios(s.name, c.name, "acq/s") // stock ÷ golocker: ≤ 1.1 is within
		stock = append(stock, line{"acq/s ≥ stock's ÷ 1.1", where, c.config,
			fmt.Sprintf("%.0f vs %.0f (%s of stock's)", r.med(c.name, "acq/s"), r.med(s.name, "acq/s"), ratioCell(r.pairedRatios(c.name, s.name, "acq/s"))),
			verdict(median(rs) <= backendRatioTarget)})
		for _, u := range []string{"p50-ms", "p99-ms"} {
			rs := r.pairedRatios(c.name, s.name, u)
			stock = append(stock, line{"wait " + strings.TrimSuffix(u, "-ms") + " ≤ 1.1× stock's", where, c.config,
				fmt.Sprintf("%s (%.2f vs %.2f ms)", ratioCell(rs), r.med(c.name, u), r.med(s.name, u)), verdict(median(rs) <= backendRatioTarget)})
		}
		if c.scenario == "handles=32" {
			j := r.med(c.name, "jain")
			stock = append(stock, line{"Jain ≥ 0.95", where, c.config, fmt.Sprintf("%.3f (stock %.3f)", j, r.med(s.name, "jain")), verdict(j >= backendJainTarget)})
		}
	}
	table := func(title, intro string, lines []line) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(w, "#### %s\n\n", title)
		if intro != "" {
			fmt.Fprintf(w, "%s\n\n", intro)
		}
		fmt.Fprintln(w, "| target | where | golocker | measured | met |")
		fmt.Fprintln(w, "|---|---|---|---|---|")
		for _, l := range lines {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", l.target, l.where, l.config, l.measured, l.met)
		}
		fmt.Fprintln(w)
	}
	table("Targets against the stock recipes", "", stock)
	table("Targets against the native locks",
		"golocker-own (a Client, and so a connection pool, per handle, as separate replicas) against the database's own lock with a connection per handle, in the same run: acq/s ≥ 0.8× and wait p99 ≤ 2× the native lock's (median of the run-by-run ratios), Jain ≥ 0.95; and on SQLite and MongoDB, which have no native peer here, the median hand-off gap (gap p50: from one hold's release to the next hold) ≤ 2 ms.",
		nat)
}
