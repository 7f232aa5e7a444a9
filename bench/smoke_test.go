package bench_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golocker/locker/bench"
)

// TestScenariosSmoke runs every configuration for a moment with 2
// handles, in this process and over 2 worker processes, and checks that
// what the benchmarks would report is sane: locks were taken, never by two
// holders at once, and the counts add up.
func TestScenariosSmoke(t *testing.T) {
	addr := redisServer.Get(t).Addr
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := bench.Params{Hold: time.Millisecond, Think: time.Millisecond, Duration: 200 * time.Millisecond}
	for _, sc := range []bench.Scenario{{Handles: 2}, {Handles: 2, Procs: 2}} {
		handles, procs := sc.Names()
		for _, cfg := range bench.Configs() {
			t.Run(handles+"/"+procs+"/"+cfg.Name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				m, p, err := untilAcquired(p, func(p bench.Params) (bench.Measurement, error) {
					return sc.Run(ctx, cfg, addr, exe, p)
				})
				if err != nil {
					t.Fatal(err)
				}
				checkMeasurement(t, sc, p, m, true)
			})
		}
	}
}

// untilAcquired runs a smoke run of p, and again with twice the duration
// while a run had no acquisition, up to 32 times p's: on a loaded machine
// a backend's first hand-off can take longer than a short run. It returns
// the measurement and the parameters of the last run.
func untilAcquired(p bench.Params, run func(bench.Params) (bench.Measurement, error)) (bench.Measurement, bench.Params, error) {
	longest := 32 * p.Duration
	for {
		m, err := run(p)
		if err != nil || m.Acquisitions() > 0 || p.Duration >= longest {
			return m, p, err
		}
		p.Duration *= 2
	}
}

// checkMeasurement checks a smoke run; counted says whether the server
// counted the requests (Calls).
func checkMeasurement(t *testing.T, sc bench.Scenario, p bench.Params, m bench.Measurement, counted bool) {
	t.Helper()
	acq := m.Acquisitions()
	if m.Errors > 0 {
		t.Errorf("%d errors, the first: %s", m.Errors, m.FirstError)
	}
	if m.Overlaps > 0 {
		t.Errorf("%d overlapping holds", m.Overlaps)
	}
	if len(m.Counts) != sc.Handles {
		t.Errorf("%d handle counts, want %d", len(m.Counts), sc.Handles)
	}
	if acq == 0 {
		t.Fatalf("no acquisition in %v", p.Duration)
	}
	// Holds are disjoint and last at least Hold each.
	if most := int(p.Duration/p.Hold) + sc.Handles; acq > most {
		t.Errorf("%d acquisitions in %v with a %v hold: more than %d", acq, p.Duration, p.Hold, most)
	}
	if len(m.Intervals) != acq {
		t.Errorf("%d hold intervals for %d acquisitions", len(m.Intervals), acq)
	}
	if hold, _ := bench.HoldAndGap(m.Intervals); hold < p.Hold {
		t.Errorf("mean hold %v, shorter than %v", hold, p.Hold)
	}
	if len(m.Waits) < acq || len(m.Waits) > acq+sc.Handles {
		t.Errorf("%d waits for %d acquisitions and %d handles", len(m.Waits), acq, sc.Handles)
	}
	for _, w := range m.Waits {
		if w < 0 || time.Duration(w) > p.Duration+5*time.Second {
			t.Errorf("wait of %v", time.Duration(w))
			break
		}
	}
	p50, p99, top := bench.Percentile(m.Waits, .5), bench.Percentile(m.Waits, .99), bench.Percentile(m.Waits, 1)
	if p50 > p99 || p99 > top {
		t.Errorf("wait percentiles out of order: p50 %v, p99 %v, max %v", p50, p99, top)
	}
	if j := bench.Jain(m.Counts); j < 1/float64(sc.Handles) || j > 1 {
		t.Errorf("Jain's index %v, outside [1/n, 1]", j)
	}
	// Every library sends at least one command to acquire and one to
	// release, except between the handles of one golocker Client, whose
	// Driver passes the lock on without one (at least the first grant and
	// the last release are sent); the script's own commands come on top.
	least := 2 * int64(acq)
	if strings.HasSuffix(t.Name(), "/golocker-shared") || strings.HasSuffix(t.Name(), "/golocker-batch16") {
		least = 2
	}
	if counted && (m.Calls < least || m.AllCalls < m.Calls) {
		t.Errorf("%d commands sent, %d counted in all, for %d acquisitions", m.Calls, m.AllCalls, acq)
	}
	t.Logf("%d acquisitions (%v per handle), %d commands sent (%d with the scripts'), waits p50 %v p99 %v",
		acq, m.Counts, m.Calls, m.AllCalls, p50, p99)
}

// TestScriptCommands checks bench.ScriptCommands, which tells the
// commands a library's scripts run from those its client sends: MONITOR
// shows the first as coming from "lua". Each library takes a lock, fails
// to take it from a second handle for a while, and hands it over.
func TestScriptCommands(t *testing.T) {
	addr := redisServer.Get(t).Addr
	for _, name := range []string{"golocker-own", "redsync-1ms", "bsm-linear-1ms"} {
		cfg, _ := bench.ConfigByName(name)
		t.Run(cfg.Library, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			set, err := cfg.Open(ctx, addr, "bench/monitor", 2, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			mon, err := monitor(ctx, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer mon.Close()

			h0, h1 := set.Handles[0], set.Handles[1]
			if err := h0.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			locked := make(chan error, 1)
			go func() { locked <- h1.Lock(ctx) }()
			time.Sleep(20 * time.Millisecond) // h1 tries and fails meanwhile
			if err := h0.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-locked; err != nil {
				t.Fatal(err)
			}
			if err := h1.Unlock(ctx); err != nil {
				t.Fatal(err)
			}

			fromScript, fromClient, err := readMonitor(ctx, mon, addr)
			if err != nil {
				t.Fatal(err)
			}
			declared := bench.ScriptCommands[cfg.Library]
			for c := range fromScript {
				if !slices.Contains(declared, c) {
					t.Errorf("the scripts ran %q, not in ScriptCommands[%q] = %v", c, cfg.Library, declared)
				}
			}
			for c := range fromClient {
				if slices.Contains(declared, c) {
					t.Errorf("the client sent %q itself, but ScriptCommands[%q] = %v counts it as a script's", c, cfg.Library, declared)
				}
			}
			if len(fromScript) == 0 || len(fromClient) == 0 {
				t.Errorf("MONITOR saw commands from scripts %v and from clients %v: want some of both", fromScript, fromClient)
			}
			t.Logf("scripts ran %v; clients sent %v", keys(fromScript), keys(fromClient))
		})
	}
}

// monitor opens a connection in MONITOR mode.
func monitor(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	if _, err := c.Write([]byte("*1\r\n$7\r\nMONITOR\r\n")); err != nil {
		c.Close()
		return nil, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "+OK") {
		c.Close()
		return nil, fmt.Errorf("MONITOR: %q, %v", line, err)
	}
	return c, nil
}

// readMonitor reads the MONITOR stream up to a marker it sends itself,
// and returns the command names run by scripts and those sent by clients.
func readMonitor(ctx context.Context, mon net.Conn, addr string) (fromScript, fromClient map[string]bool, err error) {
	const marker = "bench-monitor-end"
	if _, err := bench.Do(ctx, addr, "ECHO", marker); err != nil {
		return nil, nil, err
	}
	fromScript, fromClient = map[string]bool{}, map[string]bool{}
	r := bufio.NewReader(mon)
	for range 100_000 {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, nil, fmt.Errorf("reading MONITOR: %w", err)
		}
		if strings.Contains(line, marker) {
			return fromScript, fromClient, nil
		}
		// +1700000000.123456 [0 127.0.0.1:40000] "evalsha" "…" …
		// +1700000000.123457 [0 lua] "hmget" "…" …
		src, rest, ok := strings.Cut(line, "] \"")
		if !ok {
			continue
		}
		cmd, _, _ := strings.Cut(rest, "\"")
		cmd = strings.ToLower(cmd)
		if strings.HasSuffix(src, " lua") {
			fromScript[cmd] = true
		} else {
			fromClient[cmd] = true
		}
	}
	return nil, nil, fmt.Errorf("no marker in 100000 MONITOR lines")
}

func keys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
