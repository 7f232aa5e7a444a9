// Package broken holds deliberately wrong drivers, each breaking one
// contract, so that a test can prove the conformance suite catches them.
// They wrap the in-process driver and change one behaviour each. Each has
// a fault gate of its own (the suite's Faults), so that the fault checks
// drive the broken behaviour itself.
package broken

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance/internal/faultgate"
	"github.com/golocker/locker/locallock"
)

// Kinds of broken driver.
const (
	// NoOwnerCheck releases and renews whoever holds the lock.
	NoOwnerCheck = "no-owner-check"
	// ConstantTokens declares Fencing but returns the same token each time.
	ConstantTokens = "constant-tokens"
	// IgnoresCtx waits for the lock without looking at ctx.
	IgnoresCtx = "ignores-ctx"
	// OverDeclares claims FIFO and a lost signal it does not have.
	OverDeclares = "over-declares"
	// SameDriverStale checks only that the holder is one of the driver's
	// owners, not this lease's owner (etcd #22082: a stale Unlock on a
	// session deletes the newer holder's key on the same session).
	SameDriverStale = "same-driver-stale"
	// StaleGrant returns, to a waiter that was paused, the token of a
	// grant from before the pause (the stale grant that redislock's fence
	// counter guards against, D22).
	StaleGrant = "stale-grant"
	// PhantomWaiter returns success to a waiter that was paused past its
	// lease (its session expired) without holding anything (etcd #19597).
	PhantomWaiter = "phantom-waiter"
	// AbandonsWait returns when ctx ends but goes on waiting, and takes
	// the lock for nobody (go-zookeeper's Lock).
	AbandonsWait = "abandons-wait"
	// StrandsOnDeadline returns ctx's error when the deadline passes while
	// the request is in flight, leaving the lock held by nobody
	// (bsm/redislock, redsync with go-redis ContextTimeoutEnabled).
	StrandsOnDeadline = "strands-on-deadline"
	// GivesUpAfterTTL ends a wait without a deadline after one TTL
	// (bsm/redislock).
	GivesUpAfterTTL = "gives-up-after-ttl"
	// PrefixBlocks reports a name held while a name below it ("x/y" for
	// "x") is held (etcd key ranges).
	PrefixBlocks = "prefix-blocks"
	// CloseFails returns an error from Close: only the checks' cleanups
	// fail.
	CloseFails = "close-fails"
	// DataRace writes shared state without synchronisation in Acquire:
	// only the race detector sees it.
	DataRace = "data-race"
	// BlockingOnly has no attempt that does not wait: the suite refuses it.
	BlockingOnly = "blocking-only"
	// HoldsIgnoresPrefix lists every hold, whatever the prefix asked for.
	HoldsIgnoresPrefix = "holds-ignores-prefix"
	// ForceReleaseNoop reports a forced release that freed nothing.
	ForceReleaseNoop = "force-release-noop"
	// RemembersHeld answers an attempt from memory for a second after the
	// same request found the lock held, without asking the store: waiting
	// of its own behind the SPI (golocker's SQL and MongoDB drivers' ticket
	// memory, which package locker now owns).
	RemembersHeld = "remembers-held"

	// The broken drivers of the weighted primitives (weighted.go).

	// NoWriterPreference lets readers in while a writer waits: a writer's
	// wait leaves no trace in the store (Redisson #5379).
	NoWriterPreference = "no-writer-preference"
	// KeepsPlace leaves a waiter's place in the queue when its wait ends,
	// until the place lapses (CURATOR-315: orphaned lease nodes).
	KeepsPlace = "keeps-place"
	// DowngradeReleases downgrades by releasing and acquiring again, which
	// lets a queued writer in between (CURATOR-276).
	DowngradeReleases = "downgrade-releases"
	// ReadsNotRenewed renews nothing for a read hold (Redisson #4217).
	ReadsNotRenewed = "reads-not-renewed"
	// AliasesKinds keeps the Mutex, Semaphore and RWMutex of one name in
	// one place (Redisson #4023).
	AliasesKinds = "aliases-kinds"
	// NoLimitCheck keeps each limit of a name apart instead of refusing a
	// conflict (Curator's unchecked maxLeases).
	NoLimitCheck = "no-limit-check"
	// PermitsOutliveHolders renews weighted holds in the store on its own,
	// so a crashed holder's permits never come back (Redisson #2045).
	PermitsOutliveHolders = "permits-outlive-holders"
	// MissesWakeups never wakes a waiter for more than one permit
	// (Redisson #6664).
	MissesWakeups = "misses-wakeups"
	// RenewRecreates takes a weighted hold again when its renewal finds it
	// expired (swarthy/redis-semaphore #175).
	RenewRecreates = "renew-recreates"
	// GrowsStore leaves a record in the store for every weighted
	// acquisition (Redisson #4100).
	GrowsStore = "grows-store"
	// ReleaseLies reports a release that frees nothing: the hold stays
	// until its lease runs out (a multi-lock's names stay held, Redisson
	// #4456).
	ReleaseLies = "release-lies"
	// HidesValues lists holds without their values: an election's leader
	// cannot be read (google/trillian #1387's observer learns nothing).
	HidesValues = "hides-values"
	// ProclaimNoCheck changes a term's value without an owner check: a
	// deposed leader speaks for the election.
	ProclaimNoCheck = "proclaim-no-check"
	// ValueIsIdentity takes a candidate's value for its identity: a second
	// candidate with the leader's value leads too (kubernetes #22775).
	ValueIsIdentity = "value-is-identity"
)

// Kinds lists every broken driver.
var Kinds = []string{
	NoOwnerCheck, ConstantTokens, IgnoresCtx, OverDeclares, SameDriverStale, StaleGrant,
	PhantomWaiter, AbandonsWait, StrandsOnDeadline, GivesUpAfterTTL, PrefixBlocks, CloseFails,
	DataRace, BlockingOnly, HoldsIgnoresPrefix, ForceReleaseNoop, RemembersHeld,
	NoWriterPreference, KeepsPlace, DowngradeReleases, ReadsNotRenewed, AliasesKinds,
	NoLimitCheck, PermitsOutliveHolders, MissesWakeups, RenewRecreates, GrowsStore,
	ReleaseLies, HidesValues, ProclaimNoCheck, ValueIsIdentity,
}

// Faults is what the suite needs to inject faults (conformance.Faults).
type Faults interface {
	Pause()
	Resume()
	SetDelay(time.Duration)
	Cut()
	Restore()
}

// New returns a broken driver of kind on store, and its fault controls.
func New(kind string, store *locallock.Store) (backend.Driver, Faults) {
	d := &driver{d: locallock.New(store), kind: kind, owners: make(map[string]bool), held: make(map[string]time.Time), closing: make(chan struct{})}
	if kind == OverDeclares {
		// No QueueInspector, although it declares FIFO.
		return d, &d.gate
	}
	return &queueDriver{d}, &d.gate
}

type driver struct {
	gate
	d    *locallock.Driver
	kind string

	mu       sync.Mutex
	owners   map[string]bool      // SameDriverStale: every owner this driver granted
	held     map[string]time.Time // RemembersHeld: when a request last found its lock held
	renewals sync.WaitGroup       // PermitsOutliveHolders: the store's own renewals
	closing  chan struct{}        // closed by Close: ends them
}

type queueDriver struct{ *driver }

func (q *queueDriver) Waiters(ctx context.Context, name string) (int, error) {
	return q.d.Waiters(ctx, name)
}

func (d *driver) Capabilities() backend.Capabilities { return d.d.Capabilities() }

func (d *driver) Close() error {
	d.Resume()
	d.stopRenewals()
	err := d.d.Close()
	if d.kind == CloseFails {
		return errors.New("broken: close failed")
	}
	return err
}

func (d *driver) Holds(ctx context.Context, prefix string) ([]backend.Hold, error) {
	if d.kind == HoldsIgnoresPrefix {
		prefix = ""
	}
	hs, err := d.d.Holds(ctx, prefix)
	if d.kind == HidesValues {
		for i := range hs {
			hs[i].Value = ""
		}
	}
	return hs, err
}

func (d *driver) ForceRelease(ctx context.Context, name string) error {
	if d.kind == ForceReleaseNoop {
		return nil
	}
	return d.d.ForceRelease(ctx, name)
}

func (d *driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if d.kind == DataRace {
		defer raceIfConcurrent()()
	}
	switch d.kind {
	case BlockingOnly:
		return nil, backend.ErrNotSupported
	case PrefixBlocks:
		if hs, _ := d.d.Holds(ctx, r.Name+"/"); len(hs) > 0 {
			return nil, backend.ErrHeld
		}
	case RemembersHeld:
		return d.remember(ctx, r)
	}
	if l := d.sameValue(ctx, r); l != nil {
		return l, nil
	}
	r = d.rewrite(r)
	return d.call(ctx, r, d.d.Acquire)
}

// remember is RemembersHeld's Acquire.
func (d *driver) remember(ctx context.Context, r backend.Request) (backend.Lease, error) {
	key := r.Name + "\x00" + r.Owner
	d.mu.Lock()
	at, ok := d.held[key]
	d.mu.Unlock()
	if ok && time.Since(at) < time.Second {
		return nil, &backend.HeldError{Left: time.Second - time.Since(at)}
	}
	l, err := d.call(ctx, r, d.d.Acquire)
	if errors.Is(err, backend.ErrHeld) {
		d.mu.Lock()
		d.held[key] = time.Now()
		d.mu.Unlock()
	}
	return l, err
}

func (d *driver) AcquireWait(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if d.kind == DataRace {
		defer raceIfConcurrent()()
	}
	if l := d.sameValue(ctx, r); l != nil {
		return l, nil
	}
	r = d.rewrite(r)
	if wait := d.weightedWait(r); wait != nil {
		return d.call(ctx, r, wait)
	}
	switch d.kind {
	case IgnoresCtx:
		ctx = context.Background()
	case GivesUpAfterTTL:
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, r.TTL)
			defer cancel()
		}
	case AbandonsWait:
		got := make(chan backend.Lease, 1)
		go func() {
			// The wait goes on after ctx ended, and keeps what it gets.
			l, err := d.d.AcquireWait(context.Background(), r)
			if err == nil {
				got <- l
			}
		}()
		select {
		case l := <-got:
			return d.wrap(l, r), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return d.call(ctx, r, d.d.AcquireWait)
}

// call makes a request through the gate: it waits out a pause before and
// after, holds the reply back by the delay, and gives back a grant whose
// reply came after ctx ended (except StrandsOnDeadline).
func (d *driver) call(ctx context.Context, r backend.Request, op func(context.Context, backend.Request) (backend.Lease, error)) (backend.Lease, error) {
	if err := d.wait(ctx); err != nil {
		return nil, err
	}
	d.Sent()
	pausesBefore := d.Pauses()
	octx := ctx
	if d.kind == StrandsOnDeadline {
		// The request is sent whatever ctx does, after a round trip.
		octx = context.WithoutCancel(ctx)
		time.Sleep(time.Millisecond)
	}
	l, err := op(octx, r)
	if werr := d.wait(context.WithoutCancel(ctx)); werr != nil && err == nil {
		_ = l.Release(context.Background())
		return nil, werr
	}
	if err == nil {
		if delay := d.Delay(); delay > 0 {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			if d.kind != StrandsOnDeadline {
				_ = l.Release(context.Background())
			}
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	paused := d.Pauses() > pausesBefore
	switch {
	case paused && d.kind == PhantomWaiter:
		// Its session expired while it waited: it holds nothing, and
		// says it does.
		_ = l.Release(context.Background())
		return &phantom{token: l.Token()}, nil
	case paused && d.kind == StaleGrant:
		// A grant from before the pause, dated now.
		return &lease{Lease: l, d: d, name: r.Name, owner: r.Owner, token: 1, start: time.Now()}, nil
	}
	return d.wrap(l, r), nil
}

func (d *driver) wrap(l backend.Lease, r backend.Request) backend.Lease {
	d.mu.Lock()
	d.owners[r.Owner] = true
	d.mu.Unlock()
	wl := &lease{Lease: l, d: d, name: r.Name, owner: r.Owner, req: r}
	d.granted(wl)
	return wl
}

type lease struct {
	backend.Lease
	d     *driver
	name  string
	owner string
	req   backend.Request
	token uint64    // when set, the token it reports
	start time.Time // when set, the start it reports
	stop  func()    // PermitsOutliveHolders: stops the store's own renewals
}

func (l *lease) Start() time.Time {
	if !l.start.IsZero() {
		return l.start
	}
	return l.Lease.Start()
}

func (l *lease) Token() uint64 {
	switch {
	case l.token != 0:
		return l.token
	case l.d.kind == ConstantTokens:
		return 7
	}
	return l.Lease.Token()
}

func (l *lease) Lost() *backend.LostSignal {
	if l.d.kind == OverDeclares {
		return nil
	}
	return l.Lease.Lost()
}

// ownedByDriver reports whether name's holder is one of the driver's
// owners (SameDriverStale's wrong check).
func (l *lease) ownedByDriver(ctx context.Context) bool {
	hs, _ := l.d.d.Holds(ctx, l.name)
	for _, h := range hs {
		if h.Name == l.name {
			l.d.mu.Lock()
			defer l.d.mu.Unlock()
			return l.d.owners[h.Owner]
		}
	}
	return false
}

func (l *lease) Renew(ctx context.Context, ttl time.Duration) error {
	if err := l.d.wait(ctx); err != nil {
		return err
	}
	switch l.d.kind {
	case NoOwnerCheck:
		return nil
	case SameDriverStale:
		if l.ownedByDriver(ctx) {
			return nil
		}
	case ReadsNotRenewed:
		if l.req.Kind == backend.RWMutex && l.req.Weight == 1 {
			return nil
		}
	case RenewRecreates:
		return l.renewRecreating(ctx, ttl)
	}
	return l.Lease.Renew(ctx, ttl)
}

func (l *lease) Release(ctx context.Context) error {
	if err := l.d.wait(ctx); err != nil {
		return err
	}
	if l.stop != nil {
		l.stop()
	}
	switch l.d.kind {
	case NoOwnerCheck:
		// Frees whoever holds the name, as a DEL without an owner check
		// would.
		return ignoreNotHeld(l.d.ForceRelease(ctx, l.name))
	case SameDriverStale:
		if l.ownedByDriver(ctx) {
			return ignoreNotHeld(l.d.ForceRelease(ctx, l.name))
		}
	case ReleaseLies:
		return nil
	}
	return l.Lease.Release(ctx)
}

func ignoreNotHeld(err error) error {
	if errors.Is(err, backend.ErrNotHeld) {
		return nil
	}
	return err
}

// phantom is a lease on nothing.
type phantom struct{ token uint64 }

func (p *phantom) Token() uint64                              { return p.token }
func (p *phantom) Start() time.Time                           { return time.Now() }
func (p *phantom) Renew(context.Context, time.Duration) error { return nil }
func (p *phantom) Release(context.Context) error              { return nil }
func (p *phantom) Lost() *backend.LostSignal                  { return nil }

// racy is what DataRace writes without a lock.
//
//lint:ignore U1000 written only: the race detector is its reader
var racy int

// inFlight counts DataRace's acquisitions in flight.
var inFlight atomic.Int32

// raceIfConcurrent is DataRace's fault: an acquisition that starts while
// another is in flight (several clients contend) writes racy from two
// goroutines that nothing orders, which the race detector sees every time.
// (Plain writes from the contending calls themselves were often ordered
// by the store's own mutex: seen 8 times in 9.) A lone acquisition does
// nothing wrong. The function returned ends the acquisition.
func raceIfConcurrent() func() {
	if inFlight.Add(1) > 1 {
		done := make(chan struct{})
		go func() { racy++; close(done) }()
		racy++
		<-done
	}
	return func() { inFlight.Add(-1) }
}

// gate is the broken driver's fault controls: calls, not connections, are
// paused, delayed and cut.
type gate struct{ faultgate.Gate }

// wait blocks while paused; it fails when cut or when ctx ends.
func (g *gate) wait(ctx context.Context) error {
	if _, err := g.Wait(ctx.Done()); err != nil {
		if errors.Is(err, faultgate.ErrDone) {
			return ctx.Err()
		}
		return err
	}
	return nil
}
