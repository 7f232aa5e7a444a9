package otellocker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/golocker/locker"
)

// Clients start goroutines (the Client-driven tests): none may be left.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness is an observer on the SDK with an in-memory reader and span
// recorder.
type harness struct {
	obs    locker.Observer
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newHarness(t testing.TB, opts ...Option) *harness {
	t.Helper()
	h := &harness{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = h.tp.Shutdown(context.Background())
	})
	obs, err := NewObserver(append([]Option{WithMeterProvider(mp), WithTracerProvider(h.tp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	h.obs = obs
	return h
}

// point is one data point of a sum or a histogram.
type point struct {
	value float64 // a sum's value, or a histogram's sum
	count uint64  // a histogram's count
}

// metrics collects every instrument's points, by instrument name and
// encoded attribute set ("k=v,k2=v2", sorted by key).
func (h *harness) metrics(t *testing.T) map[string]map[string]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]point{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, ScopeName)
		}
		for _, m := range sm.Metrics {
			pts := map[string]point{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					pts[enc(p.Attributes)] = point{value: float64(p.Value)}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					pts[enc(p.Attributes)] = point{value: p.Sum, count: p.Count}
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
			out[m.Name] = pts
		}
	}
	return out
}

func enc(s attribute.Set) string { return s.Encoded(attribute.DefaultEncoder()) }

// wantPoints compares an instrument's points with want (values within a
// nanosecond's rounding).
func wantPoints(t *testing.T, got map[string]map[string]point, name string, want map[string]point) {
	t.Helper()
	pts := got[name]
	for k, w := range want {
		g, ok := pts[k]
		if !ok {
			t.Errorf("%s{%s}: no point; have %v", name, k, pts)
			continue
		}
		if g.count != w.count || math.Abs(g.value-w.value) > 1e-9 {
			t.Errorf("%s{%s} = %+v, want %+v", name, k, g, w)
		}
	}
	for k, g := range pts {
		if _, ok := want[k]; !ok && g.value != 0 {
			t.Errorf("%s{%s} = %+v: unexpected point", name, k, g)
		}
	}
}

const (
	lockAcquired = "golocker.lock.operation=lock,golocker.lock.outcome=acquired"
)

// script runs a scripted sequence of events through obs, as a Client would
// report them, under a parent span "request". It leaves one acquisition in
// progress.
func script(t *testing.T, h *harness) {
	t.Helper()
	o := h.obs
	ctx, req := h.tp.Tracer("test").Start(context.Background(), "request")
	bg := context.Background()

	// Lock orders/42: acquired after 10 ms, token 7.
	c1 := o.AcquireStarted(ctx, locker.AcquireStart{Name: "orders/42", Op: "lock"})
	if trace.SpanFromContext(c1).SpanContext().SpanID() == req.SpanContext().SpanID() {
		t.Error("AcquireStarted did not put the acquisition's span in ctx")
	}
	o.AcquireEnded(c1, locker.AcquireEnd{Name: "orders/42", Op: "lock", Outcome: locker.OutcomeAcquired, Wait: 10 * time.Millisecond, Token: 7})
	// A re-entry down the same call chain.
	c2 := o.AcquireStarted(ctx, locker.AcquireStart{Name: "orders/42", Op: "lock", Reentry: true})
	if c2 != ctx {
		t.Error("a re-entry's AcquireStarted changed ctx")
	}
	o.AcquireEnded(c2, locker.AcquireEnd{Name: "orders/42", Op: "lock", Reentry: true, Outcome: locker.OutcomeAcquired, Token: 7})
	// Another owner's TryLock finds it busy.
	c3 := o.AcquireStarted(bg, locker.AcquireStart{Name: "orders/42", Op: "trylock"})
	o.AcquireEnded(c3, locker.AcquireEnd{Name: "orders/42", Op: "trylock", Outcome: locker.OutcomeBusy, Wait: time.Millisecond})
	// The watchdog renews: once, then the store refuses, then fails.
	o.Renewed(locker.Renewal{Name: "orders/42", Token: 7, Latency: 2 * time.Millisecond})
	o.Renewed(locker.Renewal{Name: "orders/42", Token: 7, Latency: 3 * time.Millisecond, Err: fmt.Errorf("renew: %w", locker.ErrLost)})
	o.Renewed(locker.Renewal{Name: "orders/42", Token: 7, Latency: 4 * time.Millisecond, Err: errors.New("i/o timeout")})
	// The hold is lost after 2 s.
	o.HoldEnded(c1, locker.HoldEnd{Name: "orders/42", Token: 7, Held: 2 * time.Second, Reason: locker.LostRefused, Cause: fmt.Errorf("orders/42: %w", locker.ErrLost)})
	// jobs/nightly: acquired after 0.5 s, released after 0.25 s.
	c4 := o.AcquireStarted(bg, locker.AcquireStart{Name: "jobs/nightly", Op: "lock"})
	o.AcquireEnded(c4, locker.AcquireEnd{Name: "jobs/nightly", Op: "lock", Outcome: locker.OutcomeAcquired, Wait: 500 * time.Millisecond, Token: 1})
	o.HoldEnded(c4, locker.HoldEnd{Name: "jobs/nightly", Token: 1, Held: 250 * time.Millisecond, Reason: locker.Released})
	// Two LockTimeouts: the store fails; the caller gives up.
	c5 := o.AcquireStarted(bg, locker.AcquireStart{Name: "jobs/nightly", Op: "locktimeout"})
	o.AcquireEnded(c5, locker.AcquireEnd{Name: "jobs/nightly", Op: "locktimeout", Outcome: locker.OutcomeFailed, Wait: 5 * time.Millisecond, Err: errors.New("store down")})
	c6 := o.AcquireStarted(bg, locker.AcquireStart{Name: "jobs/nightly", Op: "locktimeout"})
	o.AcquireEnded(c6, locker.AcquireEnd{Name: "jobs/nightly", Op: "locktimeout", Outcome: locker.OutcomeCancelled, Wait: 30 * time.Millisecond, Err: context.Canceled})
	// One acquisition still waits.
	o.AcquireStarted(bg, locker.AcquireStart{Name: "orders/43", Op: "lock"})
	req.End()
}

func TestObserverMetrics(t *testing.T) {
	h := newHarness(t)
	script(t, h)
	m := h.metrics(t)
	wantPoints(t, m, "golocker.lock.acquire.duration", map[string]point{
		lockAcquired: {count: 2, value: 0.510},
		"golocker.lock.operation=trylock,golocker.lock.outcome=busy":          {count: 1, value: 0.001},
		"golocker.lock.operation=locktimeout,golocker.lock.outcome=failed":    {count: 1, value: 0.005},
		"golocker.lock.operation=locktimeout,golocker.lock.outcome=cancelled": {count: 1, value: 0.030},
	})
	wantPoints(t, m, "golocker.lock.hold.duration", map[string]point{
		"golocker.lock.reason=refused":  {count: 1, value: 2},
		"golocker.lock.reason=released": {count: 1, value: 0.25},
	})
	wantPoints(t, m, "golocker.lock.holds.active", map[string]point{"": {value: 0}})
	wantPoints(t, m, "golocker.lock.waiters", map[string]point{"": {value: 1}})
	wantPoints(t, m, "golocker.lock.renewals", map[string]point{
		"golocker.renewal.outcome=ok":      {value: 1},
		"golocker.renewal.outcome=refused": {value: 1},
		"golocker.renewal.outcome=failed":  {value: 1},
	})
	wantPoints(t, m, "golocker.lock.renewal.duration", map[string]point{
		"golocker.renewal.outcome=ok":      {count: 1, value: 0.002},
		"golocker.renewal.outcome=refused": {count: 1, value: 0.003},
		"golocker.renewal.outcome=failed":  {count: 1, value: 0.004},
	})
	wantPoints(t, m, "golocker.lock.lost", map[string]point{"golocker.lock.reason=refused": {value: 1}})
	if len(m) != 7 {
		t.Errorf("%d instruments, want 7", len(m))
	}
	for name, pts := range m {
		for k := range pts {
			if strings.Contains(k, string(AttrName)) {
				t.Errorf("%s{%s}: a lock name without WithNameLabel or WithLockNames", name, k)
			}
		}
	}
}

func TestObserverSpans(t *testing.T) {
	h := newHarness(t)
	script(t, h)
	spans := h.spans.Ended()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	want := []string{"golocker.Lock", "golocker.TryLock", "golocker.hold", "golocker.Lock", "golocker.hold", "golocker.LockTimeout", "golocker.LockTimeout", "request"}
	if !slices.Equal(names, want) {
		t.Fatalf("ended spans %v, want %v (no span for the re-entry)", names, want)
	}
	if n := len(h.spans.Started()); n != len(want)+1 {
		t.Errorf("%d spans started, want %d (the waiting acquisition's too)", n, len(want)+1)
	}
	attrs := func(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
		m := map[attribute.Key]string{}
		for _, kv := range s.Attributes() {
			m[kv.Key] = kv.Value.String()
		}
		return m
	}
	lock, try, hold, hold2, failed, cancelled, req := spans[0], spans[1], spans[2], spans[4], spans[5], spans[6], spans[7]

	if lock.Parent().SpanID() != req.SpanContext().SpanID() || lock.SpanKind() != trace.SpanKindInternal {
		t.Errorf("the acquisition's span is not an internal child of the caller's")
	}
	if a := attrs(lock); a[AttrOperation] != "lock" || a[AttrOutcome] != "acquired" || a[AttrToken] != "7" {
		t.Errorf("acquisition span attributes %v", a)
	}
	if a := attrs(try); a[AttrOutcome] != "busy" || try.Status().Code != codes.Unset || try.Parent().IsValid() {
		t.Errorf("TryLock span: %v, status %v, parent %v", a, try.Status(), try.Parent())
	}
	// The hold: a sibling of its acquisition, linked to it, ended by the
	// loss with an error status.
	if hold.Parent().SpanID() != req.SpanContext().SpanID() {
		t.Errorf("the hold's span has parent %v, want the caller's span", hold.Parent().SpanID())
	}
	if l := hold.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != lock.SpanContext().SpanID() {
		t.Errorf("the hold's span links %v, want its acquisition", l)
	}
	if a := attrs(hold); a[AttrToken] != "7" || a[AttrReason] != "refused" || hold.Status().Code != codes.Error || !strings.Contains(hold.Status().Description, "lost") {
		t.Errorf("lost hold span: %v, status %v", a, hold.Status())
	}
	if d := hold.EndTime().Sub(hold.StartTime()); d < 0 || !hold.StartTime().After(lock.StartTime()) {
		t.Errorf("the hold's span starts %v, after its acquisition's %v? lasts %v", hold.StartTime(), lock.StartTime(), d)
	}
	if a := attrs(hold2); a[AttrReason] != "released" || hold2.Status().Code != codes.Unset {
		t.Errorf("released hold span: %v, status %v", a, hold2.Status())
	}
	if failed.Status().Code != codes.Error || failed.Status().Description != "store down" || len(failed.Events()) != 1 {
		t.Errorf("failed acquisition: status %v, events %v", failed.Status(), failed.Events())
	}
	if cancelled.Status().Code != codes.Unset || attrs(cancelled)[AttrOutcome] != "cancelled" {
		t.Errorf("cancelled acquisition: status %v, %v", cancelled.Status(), attrs(cancelled))
	}
	// The re-entry is an event on the caller's span.
	if ev := req.Events(); len(ev) != 1 || ev[0].Name != "golocker.reentry" {
		t.Errorf("the caller's span events %v, want one golocker.reentry", ev)
	}
	for _, s := range spans {
		if _, ok := attrs(s)[AttrName]; ok {
			t.Errorf("span %s has the lock's name by default", s.Name())
		}
	}
}

func TestObserverNameLabels(t *testing.T) {
	prefix := func(name string) string { p, _, _ := strings.Cut(name, "/"); return p }
	for _, tt := range []struct {
		name string
		opt  Option
		want []string // the name attribute's values on acquire.duration
	}{
		{"WithNameLabel_maps_names_to_labels", WithNameLabel(prefix), []string{"jobs", "orders"}},
		{"WithLockNames_uses_the_names", WithLockNames(), []string{"jobs/nightly", "orders/42"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opt)
			script(t, h)
			m := h.metrics(t)
			var got []string
			for k := range m["golocker.lock.acquire.duration"] {
				for kv := range strings.SplitSeq(k, ",") {
					if v, ok := strings.CutPrefix(kv, string(AttrName)+"="); ok && !slices.Contains(got, v) {
						got = append(got, v)
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("name attributes %v, want %v", got, tt.want)
			}
			k := lockAcquired + ",golocker.lock.name=" + tt.want[1]
			if p := m["golocker.lock.acquire.duration"][sortKey(k)]; p.count != 1 {
				t.Errorf("acquire.duration{%s} = %+v, want 1 acquisition", sortKey(k), p)
			}
			wantPoints(t, m, "golocker.lock.holds.active", map[string]point{
				enc(attribute.NewSet(AttrName.String(tt.want[0]))): {value: 0},
				enc(attribute.NewSet(AttrName.String(tt.want[1]))): {value: 0},
			})
			for _, s := range h.spans.Ended() {
				if s.Name() == "request" {
					continue
				}
				found := false
				for _, kv := range s.Attributes() {
					found = found || kv.Key == AttrName && slices.Contains(tt.want, kv.Value.AsString())
				}
				if !found {
					t.Errorf("span %s lacks the name attribute: %v", s.Name(), s.Attributes())
				}
			}
		})
	}
}

// sortKey re-encodes "k=v,..." with the keys sorted, as attribute sets do.
func sortKey(k string) string {
	var kvs []attribute.KeyValue
	for kv := range strings.SplitSeq(k, ",") {
		key, v, _ := strings.Cut(kv, "=")
		kvs = append(kvs, attribute.String(key, v))
	}
	return enc(attribute.NewSet(kvs...))
}

func TestObserverUsesTheGlobalProviders(t *testing.T) {
	mp, tp := otel.GetMeterProvider(), otel.GetTracerProvider()
	defer func() {
		otel.SetMeterProvider(mp)
		otel.SetTracerProvider(tp)
	}()
	h := &harness{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	gmp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	defer gmp.Shutdown(context.Background())
	defer h.tp.Shutdown(context.Background())
	otel.SetMeterProvider(gmp)
	otel.SetTracerProvider(h.tp)
	obs, err := NewObserver()
	if err != nil {
		t.Fatal(err)
	}
	h.obs = obs
	script(t, h)
	if p := h.metrics(t)["golocker.lock.acquire.duration"][lockAcquired]; p.count != 2 {
		t.Errorf("acquire.duration through the global MeterProvider: %+v", p)
	}
	if n := len(h.spans.Ended()); n != 8 {
		t.Errorf("%d spans through the global TracerProvider, want 8", n)
	}
}

func TestNewObserverOptions(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []Option
	}{
		{"a_nil_MeterProvider", []Option{WithMeterProvider(nil)}},
		{"a_nil_TracerProvider", []Option{WithTracerProvider(nil)}},
		{"a_nil_label_function", []Option{WithNameLabel(nil)}},
		{"both_name_options", []Option{WithNameLabel(strings.ToLower), WithLockNames()}},
		{"a_nil_option", []Option{nil}},
	} {
		t.Run(tt.name+"_is_refused", func(t *testing.T) {
			if _, err := NewObserver(tt.opts...); !errors.Is(err, ErrInvalidOption) {
				t.Errorf("NewObserver: %v, want ErrInvalidOption", err)
			}
		})
	}
}
