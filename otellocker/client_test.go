package otellocker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/locallock"
)

// probe counts the events a Client reports.
type probe struct{ n atomic.Int64 }

func (p *probe) AcquireStarted(ctx context.Context, _ locker.AcquireStart) context.Context {
	p.n.Add(1)
	return ctx
}
func (p *probe) AcquireEnded(context.Context, locker.AcquireEnd) { p.n.Add(1) }
func (p *probe) HoldEnded(context.Context, locker.HoldEnd)       { p.n.Add(1) }
func (p *probe) Renewed(locker.Renewal)                          { p.n.Add(1) }

// nopObserver is the cheapest Observer, for the benchmark.
type nopObserver struct{}

func (nopObserver) AcquireStarted(ctx context.Context, _ locker.AcquireStart) context.Context {
	return ctx
}
func (nopObserver) AcquireEnded(context.Context, locker.AcquireEnd) {}
func (nopObserver) HoldEnded(context.Context, locker.HoldEnd)       {}
func (nopObserver) Renewed(locker.Renewal)                          {}

func newClient(t testing.TB, opts ...locker.Option) *locker.Client {
	t.Helper()
	c, err := locker.New(locallock.New(locallock.NewStore()), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// skipUnlessWired skips t while package locker does not call its
// Observer: it runs a Lock and an Unlock and looks for events.
func skipUnlessWired(t testing.TB) {
	t.Helper()
	p := &probe{}
	c := newClient(t, locker.WithObserver(p))
	m := c.NewMutex("probe")
	ctx := context.Background()
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if p.n.Load() == 0 {
		t.Skip("needs the Observer wired into package locker: a Lock and an Unlock reported no event")
	}
}

// TestClientDrivenSequence drives a real Client on the in-process driver
// through acquisitions of every kind, a re-entry, a release and a forced
// loss, and checks what the observer recorded.
func TestClientDrivenSequence(t *testing.T) {
	skipUnlessWired(t)
	h := newHarness(t)
	c := newClient(t, locker.WithObserver(h.obs), locker.WithTTL(time.Second))
	ctx := context.Background()

	m1, m2 := c.NewMutex("orders/42"), c.NewMutex("orders/42")
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := m2.TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock of a held lock = %v, %v", ok, err)
	}
	if ok, err := m2.LockTimeout(ctx, 20*time.Millisecond); ok || err != nil {
		t.Fatalf("LockTimeout of a held lock = %v, %v", ok, err)
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// A re-entry down Do's call chain.
	job := c.NewMutex("jobs/nightly")
	err := locker.Do(ctx, job, func(ctx context.Context) error {
		if err := job.Lock(ctx); err != nil {
			return err
		}
		return job.Unlock(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	// A hold freed by force: its holder sees it lost.
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.ForceRelease(ctx, "orders/42"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m1.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the hold was not lost within 10s of the forced release")
	}
	if err := m1.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
		t.Fatalf("Unlock after the loss = %v, want ErrLost", err)
	}
	// The loss reaches the observer from the goroutine that declared it,
	// after Lost closed: poll for the hold's span to end.
	drivertest.Eventually(t, 5*time.Second, "the lost hold's end observed", func() bool {
		n := 0
		for _, s := range h.spans.Ended() {
			if s.Name() == spanHold {
				n++
			}
		}
		return n >= 3
	})

	m := h.metrics(t)
	acq := m["golocker.lock.acquire.duration"]
	for k, want := range map[string]uint64{
		lockAcquired: 3,
		"golocker.lock.operation=trylock,golocker.lock.outcome=busy":          1,
		"golocker.lock.operation=locktimeout,golocker.lock.outcome=timed_out": 1,
	} {
		if acq[k].count != want {
			t.Errorf("acquire.duration{%s}: %d, want %d", k, acq[k].count, want)
		}
	}
	if p := acq["golocker.lock.operation=locktimeout,golocker.lock.outcome=timed_out"]; p.value < 0.020 {
		t.Errorf("the LockTimeout waited %vs, want at least 20ms", p.value)
	}
	if p := m["golocker.lock.hold.duration"]["golocker.lock.reason=released"]; p.count != 2 {
		t.Errorf("released holds: %d, want 2", p.count)
	}
	var lost float64
	for _, p := range m["golocker.lock.lost"] {
		lost += p.value
	}
	if lost != 1 {
		t.Errorf("lost holds: %v, want 1 (%v)", lost, m["golocker.lock.lost"])
	}
	if p := m["golocker.lock.holds.active"][""]; p.value != 0 {
		t.Errorf("active holds at the end: %v", p.value)
	}
	if p := m["golocker.lock.waiters"][""]; p.value != 0 {
		t.Errorf("waiters at the end: %v", p.value)
	}
	counts := map[string]int{}
	for _, s := range h.spans.Ended() {
		counts[s.Name()]++
	}
	if counts["golocker.Lock"] != 3 || counts["golocker.TryLock"] != 1 || counts["golocker.LockTimeout"] != 1 || counts["golocker.hold"] != 3 {
		t.Errorf("spans %v, want 3 Lock, 1 TryLock, 1 LockTimeout, 3 hold", counts)
	}
}

// BenchmarkLockUnlock measures what an observer costs an uncontended
// Lock+Unlock on the in-process driver: none, one that does nothing, and
// this package's on the OpenTelemetry SDK (a manual reader, a tracer
// provider that samples every span and exports none). Run it with -count
// to interleave the three. Until package locker calls its Observer, the
// three measure the same thing.
func BenchmarkLockUnlock(b *testing.B) {
	otelObs := func(b *testing.B, opts ...Option) locker.Observer {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		tp := sdktrace.NewTracerProvider()
		b.Cleanup(func() {
			_ = mp.Shutdown(context.Background())
			_ = tp.Shutdown(context.Background())
		})
		o, err := NewObserver(append([]Option{WithMeterProvider(mp), WithTracerProvider(tp)}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		return o
	}
	for _, tc := range []struct {
		name string
		obs  func(b *testing.B) locker.Observer
	}{
		{"none", nil},
		{"nop", func(*testing.B) locker.Observer { return nopObserver{} }},
		{"otel", func(b *testing.B) locker.Observer { return otelObs(b) }},
		{"otel_names", func(b *testing.B) locker.Observer { return otelObs(b, WithLockNames()) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var opts []locker.Option
			if tc.obs != nil {
				opts = append(opts, locker.WithObserver(tc.obs(b)))
			}
			c := newClient(b, opts...)
			m := c.NewMutex("bench")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := m.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := m.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkObserverEvents measures the observer's work for one hold's
// events (AcquireStarted, AcquireEnded, HoldEnded), called directly: on
// the SDK as above, and on the API's no-op providers, which leaves this
// package's own cost.
func BenchmarkObserverEvents(b *testing.B) {
	for _, tc := range []struct {
		name string
		noop bool
		opts []Option
	}{
		{"sdk", false, nil},
		{"sdk_lock_names", false, []Option{WithLockNames()}},
		{"noop", true, nil},
		{"noop_lock_names", true, []Option{WithLockNames()}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var mp metric.MeterProvider = metricnoop.NewMeterProvider()
			var tp trace.TracerProvider = tracenoop.NewTracerProvider()
			if !tc.noop {
				smp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				stp := sdktrace.NewTracerProvider()
				defer smp.Shutdown(context.Background())
				defer stp.Shutdown(context.Background())
				mp, tp = smp, stp
			}
			o, err := NewObserver(append([]Option{WithMeterProvider(mp), WithTracerProvider(tp)}, tc.opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			start := locker.AcquireStart{Name: "orders/42", Op: "lock"}
			end := locker.AcquireEnd{Name: "orders/42", Op: "lock", Outcome: locker.OutcomeAcquired, Wait: time.Millisecond, Token: 7}
			held := locker.HoldEnd{Name: "orders/42", Token: 7, Held: time.Second, Reason: locker.Released}
			b.ReportAllocs()
			for b.Loop() {
				actx := o.AcquireStarted(ctx, start)
				o.AcquireEnded(actx, end)
				o.HoldEnded(actx, held)
			}
		})
	}
}
