package bench_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker"
	"github.com/golocker/locker/bench"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/redisserver"
)

// servers holds the one redis-server of a run: every benchmark and every
// configuration uses it, flushed in between. It is always started here
// (RedisWith ignores LOCKER_TEST_REDIS_ADDR), since the benchmarks flush it.
var servers testserver.Shared

var redisServer = testserver.NewLazy(&servers, func(t testserver.TB) *redisserver.RedisServer {
	return redisserver.RedisWith(t, redisserver.RedisOptions{})
})

var (
	flagDuration = flag.Duration("contended.duration", 3*time.Second, "how long each contended run lasts")
	flagHold     = flag.Duration("contended.hold", time.Millisecond, "how long a contended holder keeps the lock")
	flagThink    = flag.Duration("contended.think", time.Millisecond, "how long a contended handle waits between Unlock and Lock")
	flagOps      = flag.Int("uncontended.ops", 2000, "least Lock+Unlock pairs of one uncontended run, whatever b.N (so that -benchtime 1x measures something)")
	flagPairs    = flag.Int("interleaved.pairs", 10000, "least Lock+Unlock pairs of each handle in one BenchmarkUncontendedInterleaved run, whatever b.N")
)

// quiet discards go-redis's log lines.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	if bench.IsWorker() {
		redis.SetLogger(quiet{})
		os.Exit(bench.WorkerMain())
	}
	flag.Parse()
	if !testing.Verbose() {
		redis.SetLogger(quiet{})
	}
	os.Exit(servers.Main(m))
}

// uncontended names the configuration each library's uncontended run
// uses; retry settings play no part without contention.
var uncontended = []struct{ library, config string }{
	{bench.Golocker, "golocker-shared"},
	{bench.Redsync, "redsync-default"},
	{bench.BSM, "bsm-linear-1ms"},
}

// BenchmarkUncontended measures Lock+Unlock of one handle that nobody
// else wants: ns/op (overridden with the mean over at least
// -uncontended.ops pairs), and the p50 and p99 of one pair in µs.
func BenchmarkUncontended(b *testing.B) {
	skipUnlessEnabled(b, bench.Redis)
	addr := redisServer.Get(b).Addr
	for _, u := range uncontended {
		b.Run(u.library, func(b *testing.B) {
			cfg, ok := bench.ConfigByName(u.config)
			if !ok {
				b.Fatalf("no config %q", u.config)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if _, err := bench.Do(ctx, addr, "FLUSHALL"); err != nil {
				b.Fatal(err)
			}
			set, err := cfg.Open(ctx, addr, "bench/uncontended", 1, time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer set.Close()
			h := set.Handles[0]
			for range 20 {
				if err := bench.WarmUp(ctx, set.Handles); err != nil {
					b.Fatal(err)
				}
			}
			n := max(b.N, *flagOps)
			samples := make([]int64, n)
			b.ResetTimer()
			start := time.Now()
			for i := range n {
				t0 := time.Now()
				if err := h.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := h.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
				samples[i] = int64(time.Since(t0))
			}
			total := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(total.Nanoseconds())/float64(n), "ns/op")
			b.ReportMetric(us(bench.Percentile(samples, 0.50)), "p50-us")
			b.ReportMetric(us(bench.Percentile(samples, 0.99)), "p99-us")
		})
	}
}

// BenchmarkUncontendedInterleaved measures the same as BenchmarkUncontended,
// but the handles take turns in blocks of uncontendedBlock pairs, so that a
// change in the machine's load (other processes) falls on all of them
// alike: -interleaved.pairs pairs each (10,000 by default). Besides the
// three libraries it measures golocker's TryLock+Unlock (golocker-trylock:
// a Mutex of another Client, on another name) and golocker's driver used
// directly (golocker-driver: redislock's Acquire and Release, without
// package locker), which shows what package locker adds. It reports the
// p50 and p99 of each, in µs, and golocker's, golocker-trylock's and
// golocker-driver's p50 and p99 ÷ bsm/redislock's.
func BenchmarkUncontendedInterleaved(b *testing.B) {
	skipUnlessEnabled(b, bench.Redis)
	addr := redisServer.Get(b).Addr
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := bench.Do(ctx, addr, "FLUSHALL"); err != nil {
		b.Fatal(err)
	}
	var names []string
	var hs []bench.Handle
	add := func(name string, h bench.Handle) {
		names = append(names, name)
		hs = append(hs, h)
	}
	for _, u := range uncontended {
		cfg, _ := bench.ConfigByName(u.config)
		set, err := cfg.Open(ctx, addr, "bench/interleaved/"+u.library, 1, time.Second)
		if err != nil {
			b.Fatal(err)
		}
		defer set.Close()
		add(u.library, set.Handles[0])
	}
	c, err := locker.Open(ctx, "redis://"+addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	add(tryLock, tryLockHandle{c.NewMutex("bench/interleaved/" + tryLock)})
	h, closeDriver, err := bench.OpenDriver(ctx, addr, "bench/interleaved/driver")
	if err != nil {
		b.Fatal(err)
	}
	defer closeDriver()
	add(driver, h)
	samples := inTurnsOf(b, ctx, hs, max(b.N, *flagPairs), uncontendedBlock, nil)
	b.ReportMetric(0, "ns/op")
	p50, p99 := map[string]float64{}, map[string]float64{}
	for i, name := range names {
		p50[name] = us(bench.Percentile(samples[i], 0.50))
		p99[name] = us(bench.Percentile(samples[i], 0.99))
		b.ReportMetric(p50[name], name+"-p50-us")
		b.ReportMetric(p99[name], name+"-p99-us")
	}
	for _, r := range []struct{ name, prefix string }{{bench.Golocker, "golocker"}, {tryLock, "trylock"}, {driver, "driver"}} {
		b.ReportMetric(p50[r.name]/p50[bench.BSM], r.prefix+"/bsm-p50")
		b.ReportMetric(p99[r.name]/p99[bench.BSM], r.prefix+"/bsm-p99")
	}
}

// The handles of BenchmarkUncontendedInterleaved that are not a library's
// configuration.
const (
	tryLock = "golocker-trylock"
	driver  = "golocker-driver"
)

// uncontendedBlock is how many pairs a handle of
// BenchmarkUncontendedInterleaved runs in its turn.
const uncontendedBlock = 250

// tryLockHandle locks with TryLock, which fails when the lock is held: it
// is only used uncontended.
type tryLockHandle struct{ m *locker.Mutex }

func (h tryLockHandle) Lock(ctx context.Context) error {
	ok, err := h.m.TryLock(ctx)
	if err == nil && !ok {
		err = errors.New("TryLock: the lock is held")
	}
	return err
}

func (h tryLockHandle) Unlock(ctx context.Context) error { return h.m.Unlock(ctx) }

// BenchmarkContended runs every scenario with every configuration, each
// for -contended.duration per b.N (run it with -benchtime 1x). See
// README.md for the metrics.
func BenchmarkContended(b *testing.B) {
	skipUnlessEnabled(b, bench.Redis)
	addr := redisServer.Get(b).Addr
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	p := bench.Params{Hold: *flagHold, Think: *flagThink, Duration: *flagDuration}
	// handles=N/procs=M/config: scenarios with the same handle count are
	// grouped, so that no two sub-benchmarks share a name.
	var groups [][]bench.Scenario
	for _, sc := range bench.Scenarios {
		if n := len(groups); n > 0 && groups[n-1][0].Handles == sc.Handles {
			groups[n-1] = append(groups[n-1], sc)
		} else {
			groups = append(groups, []bench.Scenario{sc})
		}
	}
	for _, g := range groups {
		handles, _ := g[0].Names()
		b.Run(handles, func(b *testing.B) {
			for _, sc := range g {
				_, procs := sc.Names()
				b.Run(procs, func(b *testing.B) {
					for _, cfg := range bench.Configs() {
						b.Run(cfg.Name, func(b *testing.B) { runContended(b, sc, cfg, addr, exe, p) })
					}
				})
			}
		})
	}
}

// runContended runs sc with cfg b.N times and reports the runs.
func runContended(b *testing.B, sc bench.Scenario, cfg bench.Config, addr, exe string, p bench.Params) {
	ms := make([]bench.Measurement, 0, b.N)
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), p.Duration+5*time.Minute)
		m, err := sc.Run(ctx, cfg, addr, exe, p)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		ms = append(ms, m)
	}
	report(b, ms, "cmds", true)
}

// report reports the runs of one benchmark: rates and fairness averaged
// over the runs, wait percentiles over all their waits, commands per
// acquisition over all their acquisitions: unit+"/acq" (Calls) and
// "all"+unit+"/acq" (AllCalls, when it differs from Calls), if counted.
func report(b *testing.B, ms []bench.Measurement, unit string, counted bool) {
	var rate, jain float64
	var waits []int64
	var acqs int
	var calls, all int64
	var errs, overlaps int
	var hold, gap, jainProcs float64
	var gaps []int64
	for _, m := range ms {
		if testing.Verbose() {
			b.Logf("acquisitions per handle %v, per process %v; commands %v", m.Counts, m.ProcCounts, m.Commands)
		}
		jainProcs += bench.Jain(m.ProcCounts)
		h, g := bench.HoldAndGap(m.Intervals)
		hold += msec(h)
		gap += msec(g)
		gaps = append(gaps, bench.Gaps(m.Intervals)...)
		rate += m.Rate()
		jain += bench.Jain(m.Counts)
		waits = append(waits, m.Waits...)
		acqs += m.Acquisitions()
		calls += m.Calls
		all += m.AllCalls
		errs += m.Errors
		overlaps += m.Overlaps
		if m.Errors > 0 {
			b.Logf("%d errors, the first: %s", m.Errors, m.FirstError)
		}
	}
	if overlaps > 0 {
		b.Errorf("%d overlapping holds: mutual exclusion broken", overlaps)
	}
	n := float64(len(ms))
	b.ReportMetric(0, "ns/op") // the run's length is fixed: ns/op says nothing
	b.ReportMetric(rate/n, "acq/s")
	b.ReportMetric(msec(bench.Percentile(waits, 0.50)), "p50-ms")
	b.ReportMetric(msec(bench.Percentile(waits, 0.99)), "p99-ms")
	b.ReportMetric(msec(bench.Percentile(waits, 1)), "max-ms")
	b.ReportMetric(jain/n, "jain")
	if len(ms[0].ProcCounts) > 0 {
		b.ReportMetric(jainProcs/n, "jain-procs")
	}
	b.ReportMetric(hold/n, "hold-ms")
	b.ReportMetric(gap/n, "gap-ms")
	b.ReportMetric(msec(bench.Percentile(gaps, 0.5)), "gap-p50-ms")
	if acqs > 0 && counted {
		b.ReportMetric(float64(calls)/float64(acqs), unit+"/acq")
		if unit == "cmds" { // Redis: with the commands its scripts ran
			b.ReportMetric(float64(all)/float64(acqs), "all"+unit+"/acq")
		}
	}
	b.ReportMetric(float64(errs), "errors")
}

func us(d time.Duration) float64   { return float64(d) / float64(time.Microsecond) }
func msec(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// interleaveBlock is how many Lock+Unlock pairs a library runs in its turn
// (inTurns).
const interleaveBlock = 100

// inTurns is inTurnsOf with blocks of interleaveBlock pairs.
func inTurns(b *testing.B, ctx context.Context, hs []bench.Handle, n int, around func(i int) (after func())) [][]int64 {
	b.Helper()
	return inTurnsOf(b, ctx, hs, n, interleaveBlock, around)
}

// inTurnsOf warms hs up, then runs at least n Lock+Unlock pairs with each
// of them, the handles taking turns in blocks of block pairs, each
// following each other as often; it returns each handle's pair durations,
// in ns. around, if not nil, runs before each block of handle i and
// returns what runs after it. Only the turns are timed.
func inTurnsOf(b *testing.B, ctx context.Context, hs []bench.Handle, n, block int, around func(i int) (after func())) [][]int64 {
	b.Helper()
	for range 20 {
		if err := bench.WarmUp(ctx, hs); err != nil {
			b.Fatal(err)
		}
	}
	rounds := max(1, (n+block-1)/block)
	samples := make([][]int64, len(hs))
	b.ResetTimer()
	for r := range rounds {
		for k := range hs {
			i := (r + k) % len(hs)
			var after func()
			if around != nil {
				after = around(i)
			}
			for range block {
				t0 := time.Now()
				if err := hs[i].Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := hs[i].Unlock(ctx); err != nil {
					b.Fatal(err)
				}
				samples[i] = append(samples[i], int64(time.Since(t0)))
			}
			if after != nil {
				after()
			}
		}
	}
	b.StopTimer()
	return samples
}
