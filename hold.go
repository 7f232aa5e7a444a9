package locker

import (
	"context"
	"sync"
	"time"

	"github.com/golocker/locker/backend"
)

// epoch is the origin of the monotonic times (nanoseconds) that holds keep:
// 8 bytes each instead of a time.Time's 24, for clients that hold a million.
var epoch = time.Now()

// mono is a monotonic time: nanoseconds since epoch.
type mono int64

func monoNow() mono                     { return mono(time.Since(epoch)) }
func monoAt(t time.Time) mono           { return mono(t.Sub(epoch)) }
func (m mono) add(d time.Duration) mono { return m + mono(d) }

// hold is one granted lease: its owner and hold count, its loss, the calls
// made on its lease, and its watchdog state. It is kept small: a Client may
// hold a million.
type hold struct {
	hd       *handle // the handle that took it
	owner    *owner
	lease    backend.Lease
	token    uint64
	ttl      time.Duration
	every    time.Duration   // the renewal period: TTL/3, or less (WithRenewInterval)
	acquired mono            // when the acquisition returned
	obsCtx   context.Context // the acquisition's ctx, given to the Observer; nil without one
	renew    bool            // the watchdog renews it
	fixed    bool            // WithFixedLease: it ends at its TTL
	session  bool            // the driver keeps it alive (SessionLease)

	// Guarded by the Client's mu.
	ending bool  // its last Unlock is releasing it
	levels int32 // levels held: Lock, then re-entries (an RWMutex's write levels)
	reads  int32 // an RWMutex's read levels

	// Loss, guarded by lostMu; loss is made when first needed.
	lostMu   sync.Mutex
	loss     *lossState
	stopLost func() bool // stops the lease's AfterLost function

	// callMu serialises the calls on the lease (backend's contract):
	// renewals, then one Release or Pass.
	callMu sync.Mutex

	// The small fields of the three groups side by side, so that a hold
	// fits in 176 bytes: at a million holds a Client keeps, each word
	// counts.
	lost     bool  // guarded by lostMu
	spent    bool  // guarded by callMu: Release or a Pass was called
	renewing bool  // guarded by scheduler.mu, as the rest
	done     bool  // no more events
	bidx     int32 // index in its bucket of the timetable, -1 when in none
	fails    int32 // renewal failures in a row

	validUntil  mono // the lease cannot have run out on the store before this
	next        mono // next event: a renewal, or the deadline; its bucket is next's millisecond
	lastErr     error
	cancelRenew context.CancelFunc // ends the renewal in flight
}

// lossState is what a hold keeps of its loss, and of who waits for it.
type lossState struct {
	ch     chan struct{} // closed when lost; made if asked for
	cause  error
	onLost []func() // run once when lost (Do cancels its ctx)
}

func newHold(hd *handle, o *owner, l backend.Lease, caps backend.Capabilities, start time.Time) *hold {
	h := &hold{
		hd:         hd,
		owner:      o,
		lease:      l,
		token:      l.Token(),
		ttl:        hd.cfg.ttl,
		every:      hd.cfg.ttl / 3,
		acquired:   monoNow(),
		fixed:      hd.cfg.fixed,
		session:    caps.SessionLease,
		levels:     1,
		validUntil: monoAt(start).add(hd.cfg.ttl),
		bidx:       -1,
	}
	if hd.read {
		h.levels, h.reads = 0, 1
	}
	h.renew = !h.fixed && !h.session
	if e := hd.cfg.renewEvery; e > 0 && e < h.every {
		h.every = e
	}
	return h
}

// owns reports whether a call with ctx owner o on handle hd acts for h's
// owner: o is h's owner, or o is nil and h was taken without one through
// hd.
func (h *hold) owns(o *owner, hd *handle) bool {
	if o != nil {
		return h.owner == o
	}
	return h.owner.anon && (h.hd == hd || h.hd.pair == hd)
}

// margin is how long before the lease's end the hold is declared lost. The
// lease is measured from before the request was sent, so the store's
// countdown started later than ours; the margin covers clock-rate drift and
// the time the owner needs to stop.
func margin(ttl time.Duration) time.Duration { return ttl / 10 }

func (h *hold) deadline() mono { return h.validUntil.add(-margin(h.ttl)) }

// declareLost marks h lost with cause (which wraps ErrLost or ErrClosed),
// once; it reports whether this call did.
func (h *hold) declareLost(cause error) bool {
	h.lostMu.Lock()
	if h.lost {
		h.lostMu.Unlock()
		return false
	}
	h.lost = true
	if h.loss == nil {
		h.loss = &lossState{}
	}
	h.loss.cause = cause
	if h.loss.ch != nil {
		close(h.loss.ch)
	}
	fns := h.loss.onLost
	h.loss.onLost = nil
	h.lostMu.Unlock()
	for _, f := range fns {
		f()
	}
	return true
}

// lostChan returns the channel closed when h is lost.
func (h *hold) lostChan() <-chan struct{} {
	h.lostMu.Lock()
	defer h.lostMu.Unlock()
	if h.loss == nil {
		h.loss = &lossState{}
	}
	if h.loss.ch == nil {
		h.loss.ch = make(chan struct{})
		if h.lost {
			close(h.loss.ch)
		}
	}
	return h.loss.ch
}

// afterLost runs f when h is lost (at once if it is); stop undoes it.
func (h *hold) afterLost(f func()) (stop func()) {
	h.lostMu.Lock()
	if h.lost {
		h.lostMu.Unlock()
		f()
		return func() {}
	}
	if h.loss == nil {
		h.loss = &lossState{}
	}
	i := len(h.loss.onLost)
	h.loss.onLost = append(h.loss.onLost, f)
	h.lostMu.Unlock()
	return func() {
		h.lostMu.Lock()
		if h.loss != nil && i < len(h.loss.onLost) {
			h.loss.onLost[i] = func() {}
		}
		h.lostMu.Unlock()
	}
}

// lostErr returns the error wrapping ErrLost (or ErrClosed) if h was lost,
// else nil.
func (h *hold) lostErr() error {
	h.lostMu.Lock()
	defer h.lostMu.Unlock()
	if h.lost {
		return h.loss.cause
	}
	return nil
}

// renewLease renews the lease, unless it was released or passed.
func (h *hold) renewLease(ctx context.Context) error {
	h.callMu.Lock()
	defer h.callMu.Unlock()
	if h.spent {
		return backend.ErrLost
	}
	return h.lease.Renew(ctx, h.ttl)
}

// releaseLease releases the lease on the store, once.
func (h *hold) releaseLease(ctx context.Context) error {
	h.callMu.Lock()
	defer h.callMu.Unlock()
	if h.spent {
		return nil
	}
	h.spent = true
	return h.lease.Release(ctx)
}

// downgradeLease lowers the hold's weight on the store (an RWMutex's
// downgrade), unless it was released or passed.
func (h *hold) downgradeLease(ctx context.Context, weight int64) error {
	h.callMu.Lock()
	defer h.callMu.Unlock()
	if h.spent {
		return backend.ErrLost
	}
	d, ok := h.lease.(backend.Downgrader)
	if !ok {
		return errorf(ErrNotSupported, "the driver's lease cannot be downgraded (backend.Downgrader)")
	}
	return d.Downgrade(ctx, weight)
}

// proclaimLease changes the value stored with the hold (an Election's),
// unless it was released.
func (h *hold) proclaimLease(ctx context.Context, value string) error {
	h.callMu.Lock()
	defer h.callMu.Unlock()
	if h.spent {
		return backend.ErrLost
	}
	p, ok := h.lease.(backend.Proclaimer)
	if !ok {
		return errorf(ErrNotSupported, "the driver's lease cannot change its value (backend.Proclaimer)")
	}
	return p.Proclaim(ctx, value)
}

// passLease hands the hold to the next owner through the driver's Passer:
// a lease, or nil when the driver declines.
func (h *hold) passLease(ctx context.Context, p backend.Passer, r backend.Request) (backend.Lease, error) {
	h.callMu.Lock()
	defer h.callMu.Unlock()
	if h.spent {
		return nil, nil
	}
	l, err := p.Pass(ctx, r)
	if err == nil && l != nil {
		h.spent = true
	}
	return l, err
}
