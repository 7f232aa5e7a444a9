package main

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/golocker/locker"
)

// TestMetricNames reports one hold's events to the observer and checks
// the names Prometheus sees, which docs/operating.md's queries use.
func TestMetricNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	obs, err := newObserver(mp)
	if err != nil {
		t.Fatal(err)
	}
	ctx := obs.AcquireStarted(context.Background(), locker.AcquireStart{Name: "orders/42", Op: "lock"})
	obs.AcquireEnded(ctx, locker.AcquireEnd{Name: "orders/42", Op: "lock", Outcome: locker.OutcomeAcquired, Wait: 3 * time.Millisecond, Token: 9})
	obs.Renewed(locker.Renewal{Name: "orders/42", Token: 9, Latency: time.Millisecond})
	obs.HoldEnded(ctx, locker.HoldEnd{Name: "orders/42", Token: 9, Held: time.Second, Reason: locker.LostRenewalFailed, Cause: locker.ErrLost})

	w := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(w.Body)
	text := string(body)
	for _, want := range []string{
		`golocker_lock_acquire_duration_seconds_bucket{golocker_lock_name="orders",golocker_lock_operation="lock",golocker_lock_outcome="acquired"`,
		`golocker_lock_acquire_duration_seconds_count{golocker_lock_name="orders",golocker_lock_operation="lock",golocker_lock_outcome="acquired"`,
		`golocker_lock_hold_duration_seconds_sum{golocker_lock_name="orders",golocker_lock_reason="renewal_failed"`,
		`golocker_lock_holds_active{golocker_lock_name="orders"`,
		`golocker_lock_waiters{golocker_lock_name="orders"`,
		`golocker_lock_renewals_total{golocker_lock_name="orders",golocker_renewal_outcome="ok"`,
		`golocker_lock_renewal_duration_seconds_count{golocker_lock_name="orders",golocker_renewal_outcome="ok"`,
		`golocker_lock_lost_total{golocker_lock_name="orders",golocker_lock_reason="renewal_failed"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
}
