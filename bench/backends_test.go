package bench_test

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/golocker/locker/bench"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/etcdserver"
	"github.com/golocker/locker/internal/testserver/mongoserver"
	"github.com/golocker/locker/internal/testserver/sqlserver"
	"github.com/golocker/locker/internal/testserver/zkserver"
)

var (
	flagBackends   = flag.String("bench.backends", bench.Redis, "comma-separated backends the benchmarks run: redis, etcd, zk, mysql, postgres, sqlite, mongo; sql = the three SQL ones; all")
	flagBackendOps = flag.Int("backends.uncontended.ops", 1000, "least Lock+Unlock pairs of one uncontended run on a backend other than Redis")
)

// backendEnabled reports whether -bench.backends names backend.
func backendEnabled(tb testing.TB, backend string) bool {
	tb.Helper()
	bs, err := bench.ParseBackends(*flagBackends)
	if err != nil {
		tb.Fatal(err)
	}
	return bs[backend]
}

// skipUnlessEnabled skips a Redis benchmark when -bench.backends leaves
// Redis out.
func skipUnlessEnabled(b *testing.B, backend string) {
	b.Helper()
	if !backendEnabled(b, backend) {
		b.Skipf("-bench.backends=%s leaves %s out", *flagBackends, backend)
	}
}

// backendTarget is a started server: what the configurations' Open takes,
// a request counter if there is one, and for SQL servers the DSN that
// database/sql opens (go-sql-driver/mysql's, or a postgres:// URL for pgx).
type backendTarget struct {
	target string
	count  bench.Counter
	dsn    string
}

var (
	etcdServer = testserver.NewLazy(&servers, func(t testserver.TB) backendTarget {
		s := etcdserver.Etcd(t)
		if s == nil {
			return backendTarget{}
		}
		return backendTarget{target: strings.Join(s.Endpoints, ","), count: bench.EtcdCounter(s.Endpoints)}
	})
	zkServer = testserver.NewLazy(&servers, func(t testserver.TB) backendTarget {
		s := zkserver.ZooKeeper(t)
		if s == nil {
			return backendTarget{}
		}
		return backendTarget{target: strings.Join(s.Addrs, ","), count: bench.ZKCounter(s.Addrs, zkserver.FourLetterWord)}
	})
	mysqlServer = testserver.NewLazy(&servers, func(t testserver.TB) backendTarget {
		d := sqlserver.MySQL(t)
		if d == nil {
			return backendTarget{}
		}
		db, err := sql.Open("mysql", d.DSN)
		if err != nil {
			t.Fatalf("%v", err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { db.Close() })
		return backendTarget{target: d.URL, count: bench.MySQLCounter(db), dsn: d.DSN}
	})
	postgresServer = testserver.NewLazy(&servers, func(t testserver.TB) backendTarget {
		d := sqlserver.Postgres(t)
		if d == nil {
			return backendTarget{}
		}
		return backendTarget{target: d.URL, dsn: d.DSN}
	})
	sqliteServer = testserver.NewLazy(&servers, func(t testserver.TB) backendTarget {
		return backendTarget{target: sqlserver.SQLite(t).URL}
	})
	mongoServer = testserver.NewLazy(&servers, func(t testserver.TB) backendTarget {
		d := mongoserver.Mongo(t)
		if d == nil {
			return backendTarget{}
		}
		return backendTarget{target: d.URI}
	})
)

var backendServers = map[string]*testserver.Lazy[backendTarget]{
	bench.Etcd: etcdServer, bench.ZK: zkServer,
	bench.MySQL: mysqlServer, bench.Postgres: postgresServer, bench.SQLite: sqliteServer,
	bench.Mongo: mongoServer,
}

// versionQueries ask a SQL server for its version.
var versionQueries = map[string]struct{ driver, query string }{
	bench.Postgres: {"pgx", "SHOW server_version"},
	bench.MySQL:    {"mysql", "SELECT VERSION()"},
}

var printedVersions sync.Map

// printVersion prints the version of a SQL server once per process, as a
// configuration line of the benchmark format ("postgres-server: 15.20"),
// which cmd/table shows with the run's other settings. It runs before the
// sub-benchmarks of a benchmark: their result lines are printed whole.
func printVersion(b *testing.B, backend string, tgt backendTarget) {
	q, ok := versionQueries[backend]
	if !ok || tgt.dsn == "" {
		return
	}
	if _, done := printedVersions.LoadOrStore(backend, true); done {
		return
	}
	db, err := sql.Open(q.driver, tgt.dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var v string
	if err := db.QueryRowContext(ctx, q.query).Scan(&v); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("%s-server: %s\n", backend, v)
}

// otherBackends are the backends other than Redis, in AllBackends' order.
var otherBackends = bench.AllBackends[1:]

// uncontendedConfigs returns the configurations of a backend that run in
// the uncontended benchmark, one per library: with one handle, own and
// shared are the same, so a library with both runs its -shared one.
func uncontendedConfigs(backend string) []bench.Config {
	cs := bench.BackendConfigs(backend)
	shared := map[string]bool{}
	for _, c := range cs {
		shared[c.Library] = shared[c.Library] || strings.HasSuffix(c.Name, "-shared")
	}
	return slices.DeleteFunc(cs, func(c bench.Config) bool {
		return shared[c.Library] && !strings.HasSuffix(c.Name, "-shared")
	})
}

// BenchmarkBackendUncontended is BenchmarkUncontended on the backends
// other than Redis that -bench.backends names, one sub-benchmark per
// backend: golocker and the stock recipe (etcd's concurrency.Mutex,
// go-zookeeper's Lock) or the database's own lock (pg_advisory_lock,
// GET_LOCK), and golocker's driver used directly
// (golocker-driver: Acquire and Release, without package locker), at least
// -backends.uncontended.ops pairs each. The
// libraries take turns in blocks of 100 pairs, as in
// BenchmarkUncontendedInterleaved, so that a change in the machine's load
// falls on all of them alike. Each library's figures are reported with
// its name before the unit: LIBRARY:ns/op (the mean), LIBRARY:p50-us,
// LIBRARY:p99-us and LIBRARY:reqs/op (cmd/table makes a row of each).
func BenchmarkBackendUncontended(b *testing.B) {
	for _, backend := range otherBackends {
		if !backendEnabled(b, backend) {
			continue
		}
		tgt := backendServers[backend].Get(b)
		printVersion(b, backend, tgt)
		b.Run(backend, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			var libs []string
			var hs []bench.Handle
			for _, cfg := range uncontendedConfigs(backend) {
				set, err := cfg.Open(ctx, tgt.target, "bench/uncontended/"+cfg.Name, 1, time.Second)
				if err != nil {
					b.Fatal(err)
				}
				defer set.Close()
				libs = append(libs, cfg.Library)
				hs = append(hs, set.Handles[0])
			}
			h, closeDriver, err := bench.OpenBackendDriver(ctx, backend, tgt.target, "bench/uncontended/driver")
			if err != nil {
				b.Fatal(err)
			}
			defer closeDriver()
			libs = append(libs, "golocker-driver")
			hs = append(hs, h)
			reqs := make([]int64, len(hs))
			var around func(i int) func()
			if tgt.count != nil {
				around = func(i int) func() {
					before, err := tgt.count(ctx)
					if err != nil {
						b.Fatal(err)
					}
					return func() {
						after, err := tgt.count(ctx)
						if err != nil {
							b.Fatal(err)
						}
						reqs[i] += after - before
					}
				}
			}
			samples := inTurns(b, ctx, hs, max(b.N, *flagBackendOps), around)
			b.ReportMetric(0, "ns/op")
			for i, lib := range libs {
				var sum int64
				for _, s := range samples[i] {
					sum += s
				}
				b.ReportMetric(float64(sum)/float64(len(samples[i])), lib+":ns/op")
				b.ReportMetric(us(bench.Percentile(samples[i], 0.50)), lib+":p50-us")
				b.ReportMetric(us(bench.Percentile(samples[i], 0.99)), lib+":p99-us")
				if tgt.count != nil {
					b.ReportMetric(float64(reqs[i])/float64(len(samples[i])), lib+":reqs/op")
				}
			}
		})
	}
}

// BenchmarkBackendContended is BenchmarkContended on the backends other
// than Redis that -bench.backends names, in this process only:
// BACKEND/handles=N/CONFIG, N from bench.BackendContendedHandles. The
// metrics are BenchmarkContended's; reqs/acq (requests the server counted
// per acquisition) replaces cmds/acq where the server counts them.
func BenchmarkBackendContended(b *testing.B) {
	p := bench.Params{Hold: *flagHold, Think: *flagThink, Duration: *flagDuration}
	for _, backend := range otherBackends {
		if !backendEnabled(b, backend) {
			continue
		}
		tgt := backendServers[backend].Get(b)
		printVersion(b, backend, tgt)
		for _, n := range bench.BackendContendedHandles[backend] {
			for _, cfg := range bench.BackendConfigs(backend) {
				b.Run(backend+"/handles="+strconv.Itoa(n)+"/"+cfg.Name, func(b *testing.B) {
					p := p
					p.Duration = max(p.Duration, bench.BackendMinDuration[backend])
					ms := make([]bench.Measurement, 0, b.N)
					for i := range b.N {
						ctx, cancel := context.WithTimeout(context.Background(), p.Duration+5*time.Minute)
						name := "bench/contended/" + cfg.Name + "/" + strconv.Itoa(n) + "/" + strconv.Itoa(i)
						m, err := bench.RunBackend(ctx, cfg, tgt.target, name, n, p, tgt.count)
						cancel()
						if err != nil {
							b.Fatal(err)
						}
						ms = append(ms, m)
					}
					report(b, ms, "reqs", tgt.count != nil)
				})
			}
		}
	}
}

// TestBackendsSmoke runs every configuration of every backend other than
// Redis (whatever -bench.backends says) for a moment with 2 handles, as
// TestScenariosSmoke does for Redis. A backend whose server cannot start
// here is skipped.
func TestBackendsSmoke(t *testing.T) {
	p := bench.Params{Hold: time.Millisecond, Think: time.Millisecond, Duration: 200 * time.Millisecond}
	sc := bench.Scenario{Handles: 2}
	for _, backend := range otherBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel() // each server takes seconds to start
			tgt := backendServers[backend].Get(t)
			if tgt.target == "" {
				t.Skipf("no %s server", backend)
			}
			for _, cfg := range bench.BackendConfigs(backend) {
				t.Run(cfg.Name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					m, p, err := untilAcquired(p, func(p bench.Params) (bench.Measurement, error) {
						return bench.RunBackend(ctx, cfg, tgt.target, "bench/smoke/"+cfg.Name, sc.Handles, p, tgt.count)
					})
					if err != nil {
						t.Fatal(err)
					}
					checkMeasurement(t, sc, p, m, tgt.count != nil)
				})
			}
		})
	}
}
