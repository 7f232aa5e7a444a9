package otellocker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/golocker/locker"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/golocker/locker/otellocker"

// The attributes of the measurements and spans.
const (
	// AttrName is the lock's name, or the label WithNameLabel maps it to.
	// Absent by default.
	AttrName = attribute.Key("golocker.lock.name")
	// AttrOperation is the call that acquires: "lock", "trylock" or
	// "locktimeout".
	AttrOperation = attribute.Key("golocker.lock.operation")
	// AttrOutcome is how an acquisition ended: "acquired", "busy",
	// "timed_out", "cancelled" or "failed" (locker.Outcome).
	AttrOutcome = attribute.Key("golocker.lock.outcome")
	// AttrReason is how a hold ended: "released", or a reason of loss
	// (locker.Reason).
	AttrReason = attribute.Key("golocker.lock.reason")
	// AttrRenewalOutcome is how a renewal ended: "ok", "refused" (the
	// hold is gone) or "failed" (retried while the lease lasts).
	AttrRenewalOutcome = attribute.Key("golocker.renewal.outcome")
	// AttrToken is a hold's fencing token (spans only).
	AttrToken = attribute.Key("golocker.lock.token")
)

// Span names.
const (
	spanHold    = "golocker.hold"
	spanAcquire = "golocker.acquire"
	// eventReentry is the event a re-entry adds to the caller's span.
	eventReentry = "golocker.reentry"
)

// ops are the operations that acquire; spanNames their spans' names, the
// last for an operation not listed.
var (
	ops       = [...]string{"lock", "trylock", "locktimeout"}
	spanNames = [...]string{"golocker.Lock", "golocker.TryLock", "golocker.LockTimeout", spanAcquire}
)

const numOutcomes = int(locker.OutcomeFailed) + 1

var reasons = [...]locker.Reason{locker.Released, locker.LostRenewalFailed, locker.LostRefused,
	locker.LostStore, locker.LostLeaseEnded, locker.LostAtRelease, locker.Closed}

var renewalOutcomes = [...]string{"ok", "refused", "failed"}

// Histogram bucket boundaries, in seconds. Waits range from microseconds
// (in process, uncontended) to minutes; holds from milliseconds to hours.
var (
	waitBuckets    = []float64{0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}
	holdBuckets    = []float64{0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400}
	renewalBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

// observer turns a Client's events into OpenTelemetry measurements and
// spans.
type observer struct {
	tracer trace.Tracer
	label  func(string) string // nil: no name attribute

	acquireDur metric.Float64Histogram
	holdDur    metric.Float64Histogram
	active     metric.Int64ObservableUpDownCounter
	waiters    metric.Int64ObservableUpDownCounter
	renewals   metric.Int64Counter
	renewalDur metric.Float64Histogram
	lost       metric.Int64Counter

	// The attribute sets without a name, made once so that a measurement
	// allocates nothing for them.
	acquire [len(ops) + 1][numOutcomes]attrs
	ends    [len(reasons) + 1]attrs
	renew   [len(renewalOutcomes)]attrs
	starts  [len(ops) + 1][]trace.SpanStartOption

	// The counts behind active and waiters, read when the meter collects:
	// an event costs an atomic add, not a measurement (four per
	// Lock+Unlock).
	counts  gauges             // without a name label
	mu      sync.Mutex         // guards byLabel
	byLabel map[string]*gauges // with one
}

// gauges are the holds and the acquisitions in progress of one attribute
// set.
type gauges struct {
	active, waiters atomic.Int64
}

// attrs is one attribute set in the two forms the instruments take.
type attrs struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

func newAttrs(kv ...attribute.KeyValue) attrs {
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	return attrs{add: []metric.AddOption{o}, record: []metric.RecordOption{o}}
}

var _ locker.Observer = (*observer)(nil)

// NewObserver returns a locker.Observer that records a Client's
// acquisitions, holds and renewals as OpenTelemetry metrics and spans. Set
// it with locker.WithObserver. Its instruments and spans are described in
// the package doc.
func NewObserver(opts ...Option) (locker.Observer, error) {
	var cfg config
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.raw && cfg.label != nil {
		return nil, fmt.Errorf("%w: WithNameLabel and WithLockNames exclude each other", ErrInvalidOption)
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	o := &observer{tracer: cfg.tp.Tracer(ScopeName), label: cfg.label}
	if cfg.raw {
		o.label = func(name string) string { return name }
	}
	m := cfg.mp.Meter(ScopeName)
	// Each instrument in one call; the errors of all are returned together.
	var err error
	histogram := func(name, desc string, buckets []float64) metric.Float64Histogram {
		h, e := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(buckets...))
		err = errors.Join(err, e)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, e := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	upDown := func(name, unit, desc string) metric.Int64ObservableUpDownCounter {
		c, e := m.Int64ObservableUpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	o.acquireDur = histogram("golocker.lock.acquire.duration",
		"Time from the call of Lock, TryLock or LockTimeout to its outcome (re-entries aside).", waitBuckets)
	o.holdDur = histogram("golocker.lock.hold.duration",
		"How long holds lasted, from the acquisition to the release or loss.", holdBuckets)
	o.active = upDown("golocker.lock.holds.active", "{hold}", "Holds of this process now.")
	o.waiters = upDown("golocker.lock.waiters", "{acquisition}", "Acquisitions in progress now (re-entries aside).")
	o.renewals = counter("golocker.lock.renewals", "{renewal}", "Lease renewals by the watchdog, by outcome.")
	o.renewalDur = histogram("golocker.lock.renewal.duration", "Time the store took to answer a renewal.", renewalBuckets)
	o.lost = counter("golocker.lock.lost", "{hold}", "Holds that ended other than by their last Unlock, by reason.")
	if err == nil {
		_, err = m.RegisterCallback(o.observe, o.active, o.waiters)
	}
	if err != nil {
		return nil, fmt.Errorf("otellocker: instruments: %w", err)
	}
	for i := range o.acquire {
		op := "other"
		if i < len(ops) {
			op = ops[i]
		}

		o.starts[i] = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(AttrOperation.String(op))}
		for out := range numOutcomes {
			o.acquire[i][out] = newAttrs(AttrOperation.String(op), AttrOutcome.String(locker.Outcome(out).String()))
		}
	}
	for i := range o.ends {
		r := "other"
		if i < len(reasons) {
			r = string(reasons[i])
		}
		o.ends[i] = newAttrs(AttrReason.String(r))
	}
	for i, r := range renewalOutcomes {
		o.renew[i] = newAttrs(AttrRenewalOutcome.String(r))
	}
	o.byLabel = make(map[string]*gauges)
	return o, nil
}

// countsOf returns the counts of name's attribute set.
func (o *observer) countsOf(name string) *gauges {
	if o.label == nil {
		return &o.counts
	}
	label := o.label(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	g := o.byLabel[label]
	if g == nil {
		g = new(gauges)
		o.byLabel[label] = g
	}
	return g
}

// observe reports the counts of holds and waiters when the meter collects.
func (o *observer) observe(_ context.Context, ob metric.Observer) error {
	if o.label == nil {
		ob.ObserveInt64(o.active, o.counts.active.Load())
		ob.ObserveInt64(o.waiters, o.counts.waiters.Load())
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for label, g := range o.byLabel {
		set := metric.WithAttributes(AttrName.String(label))
		ob.ObserveInt64(o.active, g.active.Load(), set)
		ob.ObserveInt64(o.waiters, g.waiters.Load(), set)
	}
	return nil
}

// opName is op, or "other" for an operation not listed in ops.
func opName(op string) string {
	if i := opIndex(op); i < len(ops) {
		return ops[i]
	}
	return "other"
}

func opIndex(op string) int {
	for i, x := range ops {
		if x == op {
			return i
		}
	}
	return len(ops)
}

func reasonIndex(r locker.Reason) int {
	for i, x := range reasons {
		if x == r {
			return i
		}
	}
	return len(reasons)
}

func outcomeIndex(o locker.Outcome) int {
	if o < 0 || int(o) >= numOutcomes {
		return int(locker.OutcomeFailed)
	}
	return int(o)
}

// The attribute sets of each instrument: made once without a name
// label; with one, made for each call (the price of the label).

func (o *observer) acquireAttrs(e locker.AcquireEnd) attrs {
	if o.label == nil {
		return o.acquire[opIndex(e.Op)][outcomeIndex(e.Outcome)]
	}
	return newAttrs(AttrOperation.String(opName(e.Op)), AttrOutcome.String(e.Outcome.String()), AttrName.String(o.label(e.Name)))
}

func (o *observer) endAttrs(e locker.HoldEnd) attrs {
	if o.label == nil {
		return o.ends[reasonIndex(e.Reason)]
	}
	return newAttrs(AttrReason.String(string(e.Reason)), AttrName.String(o.label(e.Name)))
}

func (o *observer) renewAttrs(k int, name string) attrs {
	if o.label == nil {
		return o.renew[k]
	}
	return newAttrs(AttrRenewalOutcome.String(renewalOutcomes[k]), AttrName.String(o.label(name)))
}

// spanStart returns the start options of an acquisition's span.
func (o *observer) spanStart(e locker.AcquireStart) []trace.SpanStartOption {
	if o.label == nil {
		return o.starts[opIndex(e.Op)]
	}
	return []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrOperation.String(opName(e.Op)), AttrName.String(o.label(e.Name)))}
}

// acquisition is what an acquisition's context carries from AcquireStarted
// to AcquireEnded and HoldEnded, when its span is recorded. It is that
// context itself (the acquisition span's, with one more value), so that
// AcquireStarted allocates it alone.
type acquisition struct {
	context.Context                 // the acquisition span's ctx
	parent          context.Context // the caller's ctx: its span is the hold span's parent

	mu   sync.Mutex
	hold trace.Span // nil until the acquisition succeeds
}

type acquisitionKey struct{}

// Value implements context.Context: the acquisition under acquisitionKey.
func (a *acquisition) Value(key any) any {
	if key == (acquisitionKey{}) {
		return a
	}
	return a.Context.Value(key)
}

// internalKind is the hold span's kind, made once.
var internalKind = trace.WithSpanKind(trace.SpanKindInternal)

// AcquireStarted implements locker.Observer: it counts a waiter and starts
// the acquisition's span. A re-entry is neither: it touches no store and
// holds nothing new.
func (o *observer) AcquireStarted(ctx context.Context, e locker.AcquireStart) context.Context {
	if e.Reentry {
		return ctx
	}
	o.countsOf(e.Name).waiters.Add(1)
	parent := ctx
	ctx, span := o.tracer.Start(ctx, spanNames[opIndex(e.Op)], o.spanStart(e)...)
	if !span.IsRecording() {
		// Not sampled: nor would the hold's span be, under the same
		// parent. Nothing to carry to AcquireEnded.
		return ctx
	}
	return &acquisition{Context: ctx, parent: parent}
}

// AcquireEnded implements locker.Observer: it records the wait, ends the
// acquisition's span and, when the lock was acquired, counts the hold and
// starts its span. A re-entry adds an event to the caller's span.
func (o *observer) AcquireEnded(ctx context.Context, e locker.AcquireEnd) {
	if e.Reentry {
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			kv := []attribute.KeyValue{AttrOperation.String(opName(e.Op)), AttrOutcome.String(e.Outcome.String())}
			if o.label != nil {
				kv = append(kv, AttrName.String(o.label(e.Name)))
			}
			span.AddEvent(eventReentry, trace.WithAttributes(kv...))
		}
		return
	}
	g := o.countsOf(e.Name)
	g.waiters.Add(-1)
	o.acquireDur.Record(ctx, e.Wait.Seconds(), o.acquireAttrs(e).record...)

	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		if e.Outcome == locker.OutcomeAcquired {
			span.SetAttributes(AttrOutcome.String(e.Outcome.String()), token(e.Token))
		} else {
			span.SetAttributes(AttrOutcome.String(e.Outcome.String()))
		}
		if e.Outcome == locker.OutcomeFailed && e.Err != nil {
			span.RecordError(e.Err)
			span.SetStatus(codes.Error, e.Err.Error())
		}
	}
	span.End()
	if e.Outcome != locker.OutcomeAcquired {
		return
	}
	g.active.Add(1)
	a, _ := ctx.Value(acquisitionKey{}).(*acquisition)
	if a == nil {
		return
	}
	// The hold's span is a sibling of the acquisition's, under the
	// caller's span, and links to the acquisition.
	kv := []attribute.KeyValue{token(e.Token)}
	if o.label != nil {
		kv = append(kv, AttrName.String(o.label(e.Name)))
	}
	_, hold := o.tracer.Start(a.parent, spanHold, internalKind,
		trace.WithLinks(trace.Link{SpanContext: span.SpanContext()}),
		trace.WithAttributes(kv...))
	a.mu.Lock()
	a.hold = hold
	a.mu.Unlock()
}

// HoldEnded implements locker.Observer: it records the hold's length,
// counts a loss, and ends the hold's span.
func (o *observer) HoldEnded(ctx context.Context, e locker.HoldEnd) {
	at := o.endAttrs(e)
	o.countsOf(e.Name).active.Add(-1)
	o.holdDur.Record(ctx, e.Held.Seconds(), at.record...)
	if e.Lost() {
		o.lost.Add(ctx, 1, at.add...)
	}
	a, _ := ctx.Value(acquisitionKey{}).(*acquisition)
	if a == nil {
		return
	}
	a.mu.Lock()
	hold := a.hold
	a.hold = nil
	a.mu.Unlock()
	if hold == nil {
		return
	}
	hold.SetAttributes(AttrReason.String(string(e.Reason)))
	if e.Lost() && e.Reason != locker.Closed {
		msg := "hold lost: " + string(e.Reason)
		if e.Cause != nil {
			msg = e.Cause.Error()
			hold.RecordError(e.Cause)
		}
		hold.SetStatus(codes.Error, msg)
	}
	hold.End()
}

// Renewed implements locker.Observer: it counts the renewal by outcome
// and records the store's latency.
func (o *observer) Renewed(e locker.Renewal) {
	k := 0
	switch {
	case errors.Is(e.Err, locker.ErrLost):
		k = 1
	case e.Err != nil:
		k = 2
	}
	at := o.renewAttrs(k, e.Name)
	ctx := context.Background()
	o.renewals.Add(ctx, 1, at.add...)
	o.renewalDur.Record(ctx, e.Latency.Seconds(), at.record...)
}

func token(t uint64) attribute.KeyValue {
	if t > math.MaxInt64 {
		return AttrToken.String(fmt.Sprint(t))
	}
	return AttrToken.Int64(int64(t))
}
