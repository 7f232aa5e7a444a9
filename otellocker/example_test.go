package otellocker_test

import (
	"context"
	"log"
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/golocker/locker"
	_ "github.com/golocker/locker/locallock"
	"github.com/golocker/locker/otellocker"
)

// Record a Client's locks as OpenTelemetry metrics and spans, labelled by
// the first segment of each lock's name ("orders/42" → "orders"). Without
// WithMeterProvider and WithTracerProvider the global providers are used.
// The example program example/prometheus serves the metrics to Prometheus.
func Example() {
	ctx := context.Background()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(ctx)

	obs, err := otellocker.NewObserver(
		otellocker.WithMeterProvider(mp),
		otellocker.WithNameLabel(func(name string) string {
			kind, _, _ := strings.Cut(name, "/")
			return kind
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	c, err := locker.Open(ctx, "mem://", locker.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m := c.NewMutex("orders/42")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	// golocker.lock.acquire.duration{golocker.lock.name="orders", ...}
	// records the wait; golocker.lock.holds.active{...} counts the hold.
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
}
