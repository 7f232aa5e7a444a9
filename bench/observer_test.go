package bench_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/golocker/locker"
	"github.com/golocker/locker/otellocker"
	_ "github.com/golocker/locker/redislock"
)

// nopObserver observes nothing: what an Observer costs package locker.
type nopObserver struct{}

func (nopObserver) AcquireStarted(ctx context.Context, _ locker.AcquireStart) context.Context {
	return ctx
}
func (nopObserver) AcquireEnded(context.Context, locker.AcquireEnd) {}
func (nopObserver) HoldEnded(context.Context, locker.HoldEnd)       {}
func (nopObserver) Renewed(locker.Renewal)                          {}

// BenchmarkObserverCost measures what an Observer adds to an uncontended
// Lock+Unlock on Redis: three Clients on one server — none, a no-op
// Observer, otellocker with the OpenTelemetry SDK (a meter provider with a
// manual reader, a tracer provider that samples every span) — take turns in
// blocks of 100 pairs, each round starting with the next one, so that a
// change of the machine's load, or the position in a round, falls on all
// of them alike. It reports each one's p50 and mean, and the ratios to the
// Client without an observer.
func BenchmarkObserverCost(b *testing.B) {
	skipUnlessEnabled(b, "redis")
	ctx := context.Background()
	url := "redis://" + redisServer.Get(b).Addr
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(ctx)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer tp.Shutdown(ctx)
	otelObs, err := otellocker.NewObserver(otellocker.WithMeterProvider(mp), otellocker.WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	configs := []struct {
		name string
		opts []locker.Option
	}{
		{"none", nil},
		{"nop", []locker.Option{locker.WithObserver(nopObserver{})}},
		{"otel-sdk", []locker.Option{locker.WithObserver(otelObs)}},
	}
	ms := make([]*locker.Mutex, len(configs))
	for i, cfg := range configs {
		c, err := locker.Open(ctx, url, cfg.opts...)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		ms[i] = c.NewMutex(fmt.Sprintf("observer-cost/%s", cfg.name))
		// Warm: connections open, scripts loaded.
		for range 50 {
			if err := ms[i].Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := ms[i].Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	const block = 100
	rounds := max(b.N, *flagOps/block)
	samples := make([][]time.Duration, len(configs))
	b.ResetTimer()
	for r := range rounds {
		// Each round starts with the next configuration, so that none
		// always follows the same other one.
		for k := range ms {
			i := (r + k) % len(ms)
			m := ms[i]
			for range block {
				start := time.Now()
				if err := m.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := m.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
				samples[i] = append(samples[i], time.Since(start))
			}
		}
	}
	b.StopTimer()
	p50 := make([]float64, len(configs))
	for i, cfg := range configs {
		s := samples[i]
		slices.Sort(s)
		var sum time.Duration
		for _, d := range s {
			sum += d
		}
		p50[i] = float64(s[len(s)/2].Microseconds())
		b.ReportMetric(p50[i], cfg.name+"-p50-us")
		b.ReportMetric(float64(sum.Microseconds())/float64(len(s)), cfg.name+"-mean-us")
	}
	b.ReportMetric(p50[1]/p50[0], "nop/none-p50")
	b.ReportMetric(p50[2]/p50[0], "otel/none-p50")
}
