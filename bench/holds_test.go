package bench_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/testserver/sqlserver"
	"github.com/golocker/locker/mysqllock"
	"github.com/golocker/locker/redislock"
)

var (
	flagHolds         = flag.Int("holds.n", 100_000, "BenchmarkHolds: distinct names held at once by one Client")
	flagHoldsFor      = flag.Duration("holds.for", 20*time.Second, "BenchmarkHolds: how long they are held once all are taken")
	flagHoldsTTL      = flag.Duration("holds.ttl", 10*time.Second, "BenchmarkHolds: their lease")
	flagHoldsJobs     = flag.Int("holds.jobs", 256, "BenchmarkHolds: goroutines that take them")
	flagHoldsBackends = flag.String("holds.backends", "redis,postgres", "BenchmarkHolds: the backends, of redis and postgres")
	flagHoldsPerLease = flag.Bool("holds.perlease", true, "BenchmarkHolds: also run with one renewal call per lease")
	flagHoldsShared   = flag.Bool("holds.shared", true, "BenchmarkHolds: postgres renews batched holds through one shared lease (mysqllock.WithSharedLease)")
	flagHoldsHeap     = flag.String("holds.heapprofile", "", "BenchmarkHolds: write a heap profile here once the holds are taken")
)

// BenchmarkHolds holds -holds.n distinct names on one Client, with the
// watchdog renewing them for -holds.for, on each of -holds.backends: with
// batched renewal (backend.BatchRenewer) and, in the same run, with one
// renewal call per lease (the driver with RenewBatch hidden). It reports
// the acquisition rate, the Client's live heap per hold, the holds lost
// while held, the renewals done per second and the holds renewed per round
// trip to the store (Redis: one pipeline per RenewBatch call, or one call
// per lease; PostgreSQL: statements, counted by a GORM callback). On
// PostgreSQL, batched holds share one lease (mysqllock.WithSharedLease,
// unless -holds.shared=false), and per-lease holds each have their own.
// b.N is not used: a run is one measurement (-benchtime 1x).
//
//	go test -run '^$' -bench Holds -benchtime 1x -holds.n 1000000 -holds.for 60s -timeout 60m .
func BenchmarkHolds(b *testing.B) {
	modes := []string{"batched"}
	if *flagHoldsPerLease {
		modes = append(modes, "per-lease")
	}
	for _, backendName := range strings.Split(*flagHoldsBackends, ",") {
		open, ok := holdsBackends[backendName]
		if !ok {
			b.Fatalf("-holds.backends: unknown backend %q (redis, postgres)", backendName)
		}
		for _, mode := range modes {
			b.Run(fmt.Sprintf("%s/n=%d/%s", backendName, *flagHolds, mode), func(b *testing.B) {
				runHolds(b, open, mode == "batched")
			})
		}
	}
}

// holdsStore is a driver of a started server and its count of round trips.
type holdsStore struct {
	d          backend.Driver
	roundTrips func() int64 // nil: count the driver's renewal calls
	close      func() error
}

var holdsBackends = map[string]func(b *testing.B, ctx context.Context, batched bool) holdsStore{
	"redis": func(b *testing.B, ctx context.Context, batched bool) holdsStore {
		// As many connections as acquiring goroutines: go-redis pools 10
		// per core by default, which would bound the acquisitions in
		// flight.
		url := fmt.Sprintf("redis://%s?pool_size=%d", redisServer.Get(b).Addr, *flagHoldsJobs)
		d, err := redislock.Open(ctx, url, redislock.WithKeyPrefix(fmt.Sprintf("h%d:", time.Now().UnixNano()%1e6)))
		if err != nil {
			b.Fatal(err)
		}
		return holdsStore{d: d, close: d.Close}
	},
	"postgres": func(b *testing.B, ctx context.Context, batched bool) holdsStore {
		db := sqlserver.Postgres(b)
		gdb, err := gorm.Open(postgres.Open(db.DSN), &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true})
		if err != nil {
			b.Fatal(err)
		}
		var stmts atomic.Int64
		count := func(*gorm.DB) { stmts.Add(1) }
		_ = gdb.Callback().Raw().Before("gorm:raw").Register("bench:count", count)
		_ = gdb.Callback().Row().Before("gorm:row").Register("bench:count", count)
		sqlDB, _ := gdb.DB()
		sqlDB.SetMaxOpenConns(32)
		sqlDB.SetMaxIdleConns(32)
		shared := batched && *flagHoldsShared
		d, err := mysqllock.New(gdb, mysqllock.WithSharedLease(shared))
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("shared lease: %v", shared)
		return holdsStore{d: d, roundTrips: stmts.Load, close: func() error { _ = d.Close(); return sqlDB.Close() }}
	},
}

// renewCounting counts a driver's renewal calls and the leases they renew;
// without batch it hides the driver's BatchRenewer, so that the watchdog
// renews lease by lease. Its leases are the driver's own (in batched mode)
// so that it adds nothing to a hold.
type renewCounting struct {
	backend.Driver
	perLease      bool // wrap each lease to count its Renew calls
	calls, leases *atomic.Int64
}

type batchedCounting struct{ renewCounting }

func (d batchedCounting) RenewBatch(ctx context.Context, items []backend.RenewItem) {
	d.calls.Add(1)
	d.leases.Add(int64(len(items)))
	d.Driver.(backend.BatchRenewer).RenewBatch(ctx, items)
}

func (d renewCounting) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	l, err := d.Driver.Acquire(ctx, r)
	if err != nil || !d.perLease {
		return l, err
	}
	return &countedLease{Lease: l, d: d}, nil
}

type countedLease struct {
	backend.Lease
	d renewCounting
}

func (l *countedLease) Renew(ctx context.Context, ttl time.Duration) error {
	l.d.calls.Add(1)
	l.d.leases.Add(1)
	return l.Lease.Renew(ctx, ttl)
}

func runHolds(b *testing.B, open func(*testing.B, context.Context, bool) holdsStore, batched bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	st := open(b, ctx, batched)
	var calls, leases atomic.Int64
	var drv backend.Driver
	if batched {
		if _, ok := st.d.(backend.BatchRenewer); !ok {
			b.Fatalf("%T is not a backend.BatchRenewer", st.d)
		}
		drv = batchedCounting{renewCounting{Driver: st.d, calls: &calls, leases: &leases}}
	} else {
		drv = renewCounting{Driver: st.d, perLease: true, calls: &calls, leases: &leases}
	}
	var lost atomic.Int64
	var causes sync.Map // first cause of each reason
	c, err := locker.New(drv, locker.WithTTL(*flagHoldsTTL), locker.WithLostHook(func(e locker.HoldEnd) {
		lost.Add(1)
		causes.LoadOrStore(e.Reason, e.Cause)
	}))
	if err != nil {
		b.Fatal(err)
	}

	n := *flagHolds
	heapBefore := liveHeap()
	ms := make([]*locker.Mutex, n)
	forEach := func(f func(i int) error) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range *flagHoldsJobs {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
					if err := f(int(i)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	start := time.Now()
	forEach(func(i int) error {
		m := c.NewMutex(fmt.Sprintf("h/%d", i))
		if err := m.Lock(ctx); err != nil {
			return fmt.Errorf("Lock %d: %w", i, err)
		}
		ms[i] = m
		return nil
	})
	acquired := time.Since(start)
	perHold := float64(liveHeap()-heapBefore) / float64(n)
	if *flagHoldsHeap != "" {
		f, err := os.Create(*flagHoldsHeap)
		if err != nil {
			b.Fatal(err)
		}
		err = pprof.WriteHeapProfile(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatal(err)
		}
	}

	roundTrips := func() int64 {
		if st.roundTrips != nil {
			return st.roundTrips()
		}
		return calls.Load()
	}
	rt0, leases0, lost0 := roundTrips(), leases.Load(), lost.Load()
	held := time.NewTimer(*flagHoldsFor)
	select {
	case <-held.C:
	case <-ctx.Done():
	}
	rt, renewed, lostHeld := roundTrips()-rt0, leases.Load()-leases0, lost.Load()-lost0

	b.ReportMetric(float64(n)/acquired.Seconds(), "acq/s")
	b.ReportMetric(perHold, "B/hold")
	b.ReportMetric(float64(lostHeld), "lost")
	b.ReportMetric(float64(renewed)/flagHoldsFor.Seconds(), "renewals/s")
	b.ReportMetric(float64(renewed)/float64(max(rt, 1)), "holds/roundtrip")
	b.Logf("%d holds taken in %v (%d lost while taking them); then %d renewals in %d round trips over %v, %d lost; %.0f B per hold",
		n, acquired.Round(time.Millisecond), lost0, renewed, rt, *flagHoldsFor, lostHeld, perHold)
	causes.Range(func(reason, cause any) bool {
		b.Logf("lost (%v), the first: %v", reason, cause)
		return true
	})

	forEach(func(i int) error {
		if ms[i] != nil {
			_ = ms[i].Unlock(ctx)
		}
		return nil
	})
	if err := c.Close(); err != nil {
		b.Error(err)
	}
	if err := st.close(); err != nil {
		b.Error(err)
	}
}

// liveHeap is the heap in use after two collections.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	return s.HeapAlloc
}
