// Package otellocker records what a golocker Client does as OpenTelemetry
// metrics and spans: a locker.Observer, built as OpenTelemetry Go's contrib
// instrumentation libraries are. It depends on the OpenTelemetry API only;
// the application chooses the SDK and the exporters.
//
//	obs, err := otellocker.NewObserver() // the global MeterProvider and TracerProvider
//	...
//	c, err := locker.Open(ctx, url, locker.WithObserver(obs))
//
// # Metrics
//
//	golocker.lock.acquire.duration   histogram, s       time from Lock, TryLock or LockTimeout to its outcome
//	                                                    attributes: golocker.lock.operation, golocker.lock.outcome
//	golocker.lock.hold.duration      histogram, s       how long holds lasted; attribute: golocker.lock.reason
//	golocker.lock.holds.active       up-down counter    holds of this process now (observable)
//	golocker.lock.waiters            up-down counter    acquisitions in progress now (observable)
//	golocker.lock.renewals           counter            lease renewals; attribute: golocker.renewal.outcome
//	golocker.lock.renewal.duration   histogram, s       time the store took to answer a renewal; golocker.renewal.outcome
//	golocker.lock.lost               counter            holds that ended other than by their last Unlock;
//	                                                    attribute: golocker.lock.reason
//
// golocker.lock.operation is lock, trylock or locktimeout;
// golocker.lock.outcome is acquired, busy, timed_out, cancelled or failed
// (locker.Outcome); golocker.lock.reason is released or a reason of loss
// (locker.Reason: renewal_failed, refused, store, lease_ended,
// found_at_release, closed); golocker.renewal.outcome is ok, refused (the
// hold was gone) or failed (retried while the lease lasts).
//
// No attribute names the lock by default: lock names are often unbounded
// ("orders/<id>"), and every value would make a time series of every
// instrument. WithNameLabel maps each name to a bounded label (a prefix, a
// template's name) in golocker.lock.name; WithLockNames puts the names
// themselves there, for a few fixed names.
//
// # Spans
//
// Each acquisition is a span, golocker.Lock, golocker.TryLock or
// golocker.LockTimeout, child of the span in the caller's ctx. It is in
// the context that the Client hands to its driver, so a store client's
// own instrumentation (a Redis or SQL span) nests under it. It ends with
// the outcome and, when acquired, the fencing token (golocker.lock.token);
// a failure sets its status to Error.
//
// Each hold is a span, golocker.hold, started when the acquisition
// succeeds and ended when the hold ends, with golocker.lock.reason. It is a
// sibling of its acquisition (a child of the caller's span, which usually
// covers the critical section) and links to it. A loss sets its status to
// Error, except a Client's Close. The hold span lives in a small record
// that AcquireStarted puts in the acquisition's context, which the Client
// passes back to AcquireEnded and HoldEnded; so the span starts when the
// hold does, and exporters that show spans in flight show it. When the
// acquisition's span is not recorded (not sampled), the hold has no span
// either: under a parent-based sampler, its parent would say the same.
//
// # Re-entries
//
// A re-entry (a Lock down a call chain that already holds the lock)
// touches no store and holds nothing new: it is neither a waiter nor a
// hold, has no span and no measurement. It adds an event,
// golocker.reentry, to the caller's span.
//
// # Cost
//
// Without a name label, a measurement allocates nothing in this package:
// attribute sets are made once. The SDK's own work (two spans and five
// measurements per hold) dominates; see BenchmarkObserverEvents and
// BenchmarkLockUnlock.
package otellocker
