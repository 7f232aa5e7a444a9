package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

// Harness tells the suite how to reach the driver under test, and which
// faults it can inject.
type Harness struct {
	// Name names the driver in the report, e.g. "redis/cluster".
	Name string

	// NewDriver returns a new driver, independent of the others as a
	// driver in another process would be. Required. The suite closes it.
	NewDriver func(ctx context.Context) (backend.Driver, error)

	// NewFaultyDriver, optional, returns a new driver as NewDriver does,
	// and the controls of its connection to the store: the suite pauses
	// it, delays its replies and cuts it. Build the driver with the Dial
	// of a NewFaultNet (every driver of this module takes a dial
	// function), or wrap a driver that cannot take one with FaultyDriver.
	// Without it the fault checks that need it are skipped.
	NewFaultyDriver func(ctx context.Context) (backend.Driver, Faults, error)

	// Crash, optional, makes d stop as a process that died would: no
	// release, no renewal, no graceful end of its session. Without it the
	// suite cuts d off from the store (every call of d fails), which is a
	// crash for drivers whose holds live only by renewal; for drivers that
	// declare SessionLease the crash checks are skipped.
	Crash func(d backend.Driver) error

	// Drop, optional, deletes the current hold on name in the store
	// behind its owner's back, as an operator would: never by ending a
	// session (the fault checks do that). Without it the suite uses
	// backend.Inspector.ForceRelease when the driver has it, and skips the
	// check otherwise.
	Drop func(ctx context.Context, name string) error

	// KillServer, optional, kills the store's server — the leader, for a
	// replicated store — as a crash would, and returns the function that
	// starts it again. Offer it only where the store promises to keep
	// its data over such a crash (a cluster with a quorum, a server that
	// syncs its writes to disk): the check expects holds and fencing
	// counters to survive or holders to be told.
	KillServer func(ctx context.Context) (restart func(context.Context) error, err error)

	// Footprint, optional, counts the records (keys, rows, documents,
	// nodes) that the store keeps for the locks whose names start with
	// "conformance/" — the suite's — so that a check can see that using
	// one lock over and over, with cancelled and crashed holders, does
	// not grow the store. Without it that check is skipped.
	Footprint func(ctx context.Context) (int, error)

	// SessionTTL is how long a SessionLease driver's session outlives a
	// client that stopped talking to the store: how long a paused
	// client's holds last. Default TTL.
	SessionTTL time.Duration

	// TTL is the short lease the suite uses in checks that wait for
	// expiry. Default 1s; a store with a coarse clock (seconds) needs more.
	TTL time.Duration

	// Timeout bounds each check. Default 60s.
	Timeout time.Duration

	// Scale is how many distinct names the scale check cycles through.
	// Default 5000.
	Scale int
}

// Outcome is the result of one check.
type Outcome string

// Outcomes of a check.
const (
	Passed  Outcome = "passed"
	Failed  Outcome = "failed"
	Skipped Outcome = "skipped"
	NotRun  Outcome = "not run" // filtered out by -run
)

// CheckResult is the outcome of one check of the suite.
type CheckResult struct {
	Name    string   // e.g. "fencing/tokens_strictly_increase_across_holders"
	Proves  []string // the capabilities the check proves (see Capability names)
	Outcome Outcome
}

// Report is what Run found: the driver's declaration, the optional
// interfaces it implements, and each check's outcome. It feeds the feature
// matrix.
type Report struct {
	Driver       string
	Capabilities backend.Capabilities
	Interfaces   Interfaces
	Checks       []CheckResult
}

// Interfaces tells which optional interfaces of package backend a driver
// implements: each field is named after one, and lists every one (a test
// of this package compares the fields with package backend's source).
// Passer is a Lease's, found on the lease of the suite's first attempt;
// Downgrader and Proclaimer are found on a Semaphore lease of a driver that
// declares Weighted; the others are the Driver's.
type Interfaces struct {
	Waiter         bool
	Watcher        bool
	Inspector      bool
	QueueInspector bool
	BatchRenewer   bool
	LogSetter      bool
	Dequeuer       bool
	Passer         bool
	Downgrader     bool
	Proclaimer     bool
}

// interfacesOf reports the optional interfaces of d, of l, a Mutex lease
// that d granted, and of wl, a weighted lease that d granted (nil when d
// has none).
func interfacesOf(d backend.Driver, l, wl backend.Lease) Interfaces {
	_, waiter := d.(backend.Waiter)
	_, watcher := d.(backend.Watcher)
	_, inspector := d.(backend.Inspector)
	_, queue := d.(backend.QueueInspector)
	_, batch := d.(backend.BatchRenewer)
	_, logs := d.(backend.LogSetter)
	_, dequeuer := d.(backend.Dequeuer)
	_, passer := l.(backend.Passer)
	_, downgrader := wl.(backend.Downgrader)
	_, proclaimer := wl.(backend.Proclaimer)
	return Interfaces{
		Waiter: waiter, Watcher: watcher, Inspector: inspector, QueueInspector: queue,
		BatchRenewer: batch, LogSetter: logs, Dequeuer: dequeuer, Passer: passer, Downgrader: downgrader,
		Proclaimer: proclaimer,
	}
}

// Complete reports whether every check ran (none was filtered out by -run).
func (r *Report) Complete() bool {
	for _, c := range r.Checks {
		if c.Outcome == NotRun {
			return false
		}
	}
	return true
}

// Proved reports whether every check proving capability passed and at
// least one ran.
func (r *Report) Proved(capability string) bool {
	ran := false
	for _, c := range r.Checks {
		for _, p := range c.Proves {
			if p != capability {
				continue
			}
			switch c.Outcome {
			case Failed:
				return false
			case Passed:
				ran = true
			}
		}
	}
	return ran
}

// suite is one run of the checks against one harness.
type suite struct {
	h    Harness
	caps backend.Capabilities
	ifs  Interfaces
	ttl  time.Duration
	id   string

	mu     sync.Mutex
	rep    *Report
	probes map[*testing.T]backend.Driver
}

// Run runs every check against the driver of h and returns the report. It
// fails t when a check fails, including the checks of the driver's
// declaration. A check's outcome counts its cleanup and the race
// detector's verdict: it is what t.Run reports.
//
// Run refuses, with one error, a driver that cannot make a single attempt
// without waiting (Acquire with no wait): package locker needs one for
// TryLock and for the waits of stores without a queue.
func Run(t *testing.T, h Harness) *Report {
	t.Helper()
	if h.NewDriver == nil {
		t.Fatal("conformance: Harness.NewDriver is required")
	}
	if h.TTL <= 0 {
		h.TTL = time.Second
	}
	if h.SessionTTL <= 0 {
		h.SessionTTL = h.TTL
	}
	if h.Timeout <= 0 {
		h.Timeout = 60 * time.Second
	}
	if h.Scale <= 0 {
		h.Scale = 5000
	}
	if h.Name == "" {
		h.Name = t.Name()
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), h.Timeout)
	defer cancel()
	d, err := h.NewDriver(ctx)
	if err != nil {
		t.Fatalf("conformance: NewDriver: %v", err)
	}
	caps := d.Capabilities()
	l, err := tryOnce(ctx, d, "conformance/"+id+"/try-once")
	if err != nil {
		_ = d.Close()
		t.Fatalf("conformance: refused: %v", err)
	}
	var wl backend.Lease
	if caps.Weighted {
		wl, err = d.Acquire(ctx, backend.Request{Name: "conformance/" + id + "/try-once-weighted", Owner: id + "/w", TTL: 30 * time.Second, Kind: backend.Semaphore, Limit: 2, Weight: 2})
		if err != nil {
			_ = d.Close()
			t.Fatalf("conformance: the driver declares Weighted, and a Semaphore's first Acquire failed: %v", err)
		}
		_ = wl.Release(ctx)
	}
	ifs := interfacesOf(d, l, wl)
	if err := d.Close(); err != nil {
		t.Errorf("conformance: Close of a fresh driver: %v", err)
	}
	s := &suite{
		h:      h,
		caps:   caps,
		ifs:    ifs,
		ttl:    h.TTL,
		id:     id,
		rep:    &Report{Driver: h.Name, Capabilities: caps, Interfaces: ifs},
		probes: make(map[*testing.T]backend.Driver),
	}
	for _, c := range checks {
		s.run(t, c)
	}
	return s.rep
}

// tryOnce checks that d can make one attempt without waiting: twice on a
// fresh name, the second finding the first's hold. It returns the first
// attempt's lease, released, whose type tells the lease's optional
// interfaces.
func tryOnce(ctx context.Context, d backend.Driver, name string) (backend.Lease, error) {
	const why = "the driver has no attempt that does not wait: Acquire must take a free lock at once and return ErrHeld (wrapped) for a held one, never wait; a store that can only wait (a blocking lock recipe) cannot back TryLock"
	actx, cancel := context.WithTimeout(ctx, quick)
	defer cancel()
	l, err := d.Acquire(actx, backend.Request{Name: name, Owner: name + "/a", TTL: 30 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("%s (Acquire of a free lock: %v)", why, err)
	}
	defer l.Release(context.WithoutCancel(ctx))
	_, err = d.Acquire(actx, backend.Request{Name: name, Owner: name + "/b", TTL: 30 * time.Second})
	switch {
	case err == nil:
		return nil, errors.New("two owners both acquired a free lock: the driver does not exclude")
	case errors.Is(err, backend.ErrHeld):
		return l, nil
	case actx.Err() != nil:
		return nil, fmt.Errorf("%s (Acquire of a held lock did not return within %v)", why, quick)
	default:
		return nil, fmt.Errorf("%s (Acquire of a held lock: %v)", why, err)
	}
}

// check is one behaviour the suite proves.
type check struct {
	name   string
	proves []string
	// skip returns why the check does not apply to this driver, or "".
	skip func(s *suite) string
	run  func(t *testing.T, s *suite)
}

func (s *suite) run(t *testing.T, c check) {
	ran, skipped := false, false
	ok := t.Run(c.name, func(t *testing.T) {
		ran = true
		// Registered first, so it runs after every other cleanup.
		t.Cleanup(func() { skipped = t.Skipped() })
		if c.skip != nil {
			if why := c.skip(s); why != "" {
				t.Skip(why)
			}
		}
		// Backstop for a hang that no bounded call caught: fail loudly
		// with every goroutine's stack rather than stall the run.
		stall := time.AfterFunc(s.h.Timeout+10*time.Second, func() {
			panic(fmt.Sprintf("conformance: %s did not finish within %v", t.Name(), s.h.Timeout))
		})
		defer stall.Stop()
		c.run(t, s)
	})
	// t.Run's result counts the check's cleanups and the race detector.
	outcome := Passed
	switch {
	case !ran:
		outcome = NotRun // filtered out by -run
	case !ok:
		outcome = Failed
	case skipped:
		outcome = Skipped
	}
	s.mu.Lock()
	s.rep.Checks = append(s.rep.Checks, CheckResult{Name: c.name, Proves: c.proves, Outcome: outcome})
	s.mu.Unlock()
}

// ctx returns a context that ends with the check's time bound.
func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), s.h.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// name returns a lock name unique to this run and check.
func (s *suite) name(t *testing.T, suffix string) string {
	n := t.Name()
	if i := strings.Index(n, "/"); i >= 0 {
		n = n[i+1:]
	}
	return "conformance/" + s.id + "/" + n + "/" + suffix
}

// driver returns a new driver that the check's cleanup closes.
func (s *suite) driver(t *testing.T) backend.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.h.Timeout)
	defer cancel()
	d, err := s.h.NewDriver(ctx)
	if err != nil {
		t.Fatalf("NewDriver: %v", err)
	}
	return d
}

// client returns a new Client on a new driver, with the suite's TTL, closed
// by the check's cleanup.
func (s *suite) client(t *testing.T, opts ...locker.Option) *locker.Client {
	t.Helper()
	return s.clientOn(t, s.driver(t), opts...)
}

func (s *suite) clientOn(t *testing.T, d backend.Driver, opts ...locker.Option) *locker.Client {
	t.Helper()
	c, err := locker.New(d, append([]locker.Option{locker.WithTTL(s.ttl)}, opts...)...)
	if err != nil {
		_ = d.Close()
		t.Fatalf("locker.New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil && !errors.Is(err, errCut) {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// within runs f and fails the check if it has not returned after d: a call
// that ignores its ctx must fail the suite, not hang it. f keeps running in
// the background if it hangs.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// eventually polls cond every tick until it is true or d has passed.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := min(d/50, 50*time.Millisecond)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %v", what, d)
		}
		time.Sleep(tick)
	}
}

// start returns the check's ctx and the name of its lock: the set-up of
// every check that needs one lock.
func (s *suite) start(t *testing.T) (context.Context, string) {
	return s.ctx(t), s.name(t, "l")
}

// locked returns a new Mutex of c on name, locked, or fails the check.
func locked(t *testing.T, ctx context.Context, c *locker.Client, name string, opts ...locker.Option) *locker.Mutex {
	t.Helper()
	m := c.NewMutex(name, opts...)
	mustLock(t, ctx, m)
	return m
}

// mustLock locks m or fails the check.
func mustLock(t *testing.T, ctx context.Context, m *locker.Mutex) {
	t.Helper()
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock(%s): %v", m.Name(), err)
	}
}

// mustUnlock unlocks m or fails the check.
func mustUnlock(t *testing.T, ctx context.Context, m *locker.Mutex) {
	t.Helper()
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock(%s): %v", m.Name(), err)
	}
}

// staleUnlock checks that the Unlock of a, whose hold another owner has
// taken over and still holds, reports ErrLost and leaves that owner's
// lock taken; who names a's owner in the failures.
func (s *suite) staleUnlock(t *testing.T, ctx context.Context, a *locker.Mutex, who string) {
	t.Helper()
	if err := a.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
		t.Errorf("%s's Unlock = %v, want ErrLost", who, err)
	}
	if s.free(t, ctx, s.client(t), a.Name()) {
		t.Errorf("%s's Unlock freed the next owner's lock", who)
	}
}

// free reports whether a fresh client can take name at once (and gives it
// back).
func (s *suite) free(t *testing.T, ctx context.Context, c *locker.Client, name string) bool {
	t.Helper()
	m := c.NewMutex(name)
	ok, err := m.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock(%s): %v", name, err)
	}
	if ok {
		mustUnlock(t, ctx, m)
	}
	return ok
}

// probeDriver returns the check's driver for looking at the store, made
// on first use and closed by closeProbe or the check's cleanup.
func (s *suite) probeDriver(t *testing.T) backend.Driver {
	t.Helper()
	s.mu.Lock()
	d := s.probes[t]
	s.mu.Unlock()
	if d != nil {
		return d
	}
	d = s.driver(t)
	s.mu.Lock()
	s.probes[t] = d
	s.mu.Unlock()
	t.Cleanup(func() { s.closeProbe(t) })
	return d
}

// openProbe makes the check's probe driver now, when the driver can be
// inspected, so that a check counting goroutines counts the probe's
// among those before (a client such as gRPC's or go-zookeeper's runs
// goroutines of its own, and may connect to further servers a little
// later: open it early, not just before the count).
func (s *suite) openProbe(t *testing.T) {
	t.Helper()
	if s.ifs.QueueInspector || s.ifs.Inspector {
		s.probeDriver(t)
	}
}

// closeProbe closes the check's probe driver, if it has one open.
func (s *suite) closeProbe(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	d := s.probes[t]
	delete(s.probes, t)
	s.mu.Unlock()
	if d == nil {
		return
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close of the probe driver: %v", err)
	}
}
