package locker

import (
	"context"
	"errors"
	"time"

	"github.com/golocker/locker/backend"
)

// Mutex is a handle on one named lock. Like sync.Mutex, a Mutex shared by
// goroutines excludes them: a Lock waits while another owner holds the lock,
// in this process or any other. The owner of a hold is the caller's ctx
// (see WithOwner and Do): a Lock with a ctx whose owner holds the lock
// re-enters it, and the lock is freed when Unlock has been called as many
// times. A Lock with a ctx that carries no owner is an owner of its own. A
// Mutex is safe for concurrent use; make as many as you like, they are cheap.
//
// Unlike a sync.Mutex, a Mutex needs its Client and its name: make it with
// Client.NewMutex. The zero Mutex (var m locker.Mutex), and a nil *Mutex,
// hold nothing and never will: Lock, TryLock, LockTimeout, Unlock, Err and
// Do return ErrZeroMutex, Token and HoldCount 0, Lost nil, Name "".
type Mutex struct {
	c    *Client
	name string
	cfg  *config // the Client's, unless NewMutex had options
	err  error   // from NewMutex: returned by every method

	// Guarded by c.mu.
	cur  *hold // the hold taken through this handle, until its last Unlock
	last *hold // the most recent, for Lost after Unlock
}

// Name returns the lock's name.
func (m *Mutex) Name() string {
	if m.zero() {
		return ""
	}
	return m.name
}

// zero reports whether m was not made by NewMutex.
func (m *Mutex) zero() bool { return m == nil || m.c == nil }

// HoldCount returns how many levels of the lock are held through this
// handle: 0 when it holds nothing, 1 after Lock, 2 after a re-entry...
func (m *Mutex) HoldCount() int {
	if m.zero() {
		return 0
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	if m.cur == nil {
		return 0
	}
	return int(m.cur.count)
}

// Token returns the fencing token of the hold taken through this handle, or
// 0 when it holds nothing or the driver has no fencing. Tokens of a name
// strictly increase from holder to holder: pass the token with every write
// to the resource the lock guards, and have the resource refuse a token
// lower than the highest it has seen. That is what makes a lock safe against
// an owner that was paused past its lease. Code that Do runs finds the token
// with HoldFromContext too.
func (m *Mutex) Token() uint64 {
	if m.zero() {
		return 0
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	if m.cur == nil {
		return 0
	}
	return m.cur.token
}

// Lost returns a channel that is closed if the current hold is lost before
// its last Unlock: its lease ran out before a renewal succeeded, the store
// dropped it, a fixed lease ended, or the Client was closed. After Unlock it
// returns the channel of the hold just released, which a normal Unlock does
// not close. Before the first hold it returns nil.
func (m *Mutex) Lost() <-chan struct{} {
	if m.zero() {
		return nil
	}
	h := m.latest()
	if h == nil {
		return nil
	}
	return h.lostChan()
}

// latest returns the current hold, or else the one just released; nil
// before the first.
func (m *Mutex) latest() *hold {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	if m.cur != nil {
		return m.cur
	}
	return m.last
}

// Err returns nil while the current hold lasts (or when there is none), and,
// once it is lost, the error that says why: it wraps ErrLost (or ErrClosed),
// with the cause — the renewals that failed and the store's last error, the
// store's report, the end of a fixed lease. After Unlock it is about the
// hold just released.
func (m *Mutex) Err() error {
	if m.zero() {
		return ErrZeroMutex
	}
	h := m.latest()
	if h == nil {
		return nil
	}
	return h.lostErr()
}

// Lock waits until the lock is held or ctx ends; it then returns an error
// that matches ctx's error (and, if the store was failing, carries the
// store's last error). With a ctx whose owner holds the lock it re-enters at
// once; if that hold was lost it returns ErrLost, until Unlock has been
// called for every level of the hold.
func (m *Mutex) Lock(ctx context.Context) error {
	_, _, err := m.lockOp(ctx, "lock", true, 0)
	return err
}

// TryLock takes the lock if no other owner holds it, and never waits for
// another owner: it returns (false, nil) when the lock is held elsewhere, or
// another owner of the same Client holds it or is taking it.
func (m *Mutex) TryLock(ctx context.Context) (bool, error) {
	ok, _, err := m.lockOp(ctx, "trylock", false, 0)
	return ok, err
}

// LockTimeout waits at most wait for the lock. It returns (false, nil) when
// wait ran out, and an error when ctx ended or the store failed. A wait of
// zero or less tries once, as TryLock.
func (m *Mutex) LockTimeout(ctx context.Context, wait time.Duration) (bool, error) {
	ok, _, err := m.lockOp(ctx, "locktimeout", wait > 0, wait)
	return ok, err
}

// lockOp is Lock, TryLock or LockTimeout (timeout > 0): it reports whether
// the lock is held, and the hold.
func (m *Mutex) lockOp(ctx context.Context, op string, wait bool, timeout time.Duration) (bool, *hold, error) {
	if m.zero() {
		return false, nil, opErr(op, "", ErrZeroMutex)
	}
	if ctx == nil {
		return false, nil, opErr(op, m.name, ErrNilContext)
	}
	c := m.c
	obs := c.cfg.observer
	start := time.Now()
	octx := ctx
	if obs != nil {
		octx = obs.AcquireStarted(ctx, AcquireStart{Name: m.name, Op: op, Reentry: c.wouldReenter(ctx, m)})
	}
	var h *hold
	var reentered bool
	var err error
	if m.err != nil {
		err = m.err
	} else {
		actx := octx
		if timeout > 0 {
			var cancel context.CancelFunc
			actx, cancel = context.WithTimeout(octx, timeout)
			defer cancel()
		}
		h, reentered, err = m.acquire(actx, octx, wait)
		if err != nil && timeout > 0 && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && waitEnded(actx, start.Add(timeout)) {
			// The wait ran out: not an error.
			err = nil
		}
	}
	if obs != nil {
		e := AcquireEnd{Name: m.name, Op: op, Reentry: reentered, Wait: time.Since(start), Err: err}
		switch {
		case h != nil:
			e.Outcome, e.Token = OutcomeAcquired, h.token
		case err == nil && timeout > 0:
			e.Outcome = OutcomeTimedOut
		case err == nil:
			e.Outcome = OutcomeBusy
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrClosed):
			e.Outcome = OutcomeCancelled
		default:
			e.Outcome = OutcomeFailed
		}
		obs.AcquireEnded(octx, e)
	}
	return h != nil, h, opErr(op, m.name, err)
}

// waitEnded reports whether a DeadlineExceeded from a wait means the wait
// ran out: ctx is done, or the deadline is (nearly) reached — some clients
// (the MongoDB driver) end a call a little before its ctx's timer fires.
// A DeadlineExceeded long before the deadline is a store error instead.
func waitEnded(ctx context.Context, deadline time.Time) bool {
	return ctx.Err() != nil || time.Until(deadline) < 10*time.Millisecond
}

// wouldReenter reports whether ctx's owner holds m's lock.
func (c *Client) wouldReenter(ctx context.Context, m *Mutex) bool {
	o := ownerOf(ctx)
	if o == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.locks[m.name]
	return st != nil && st.holder != nil && st.holder.owner == o
}

// acquire takes m's lock for ctx's owner: it re-enters a hold of that owner,
// or queues behind the Client's other owners of the name and then asks the
// store. It returns a nil hold and no error when the lock is busy and wait
// is false. octx is the ctx to hand to the Observer with the hold.
func (m *Mutex) acquire(ctx, octx context.Context, wait bool) (h *hold, reentered bool, err error) {
	c := m.c
	o := ownerOf(ctx)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, false, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		c.mu.Unlock()
		return nil, false, err
	}
	st := c.locks[m.name]
	if st != nil && st.holder != nil && !st.holder.ending && o != nil && st.holder.owner == o {
		h := st.holder
		if err := h.lostErr(); err != nil {
			c.mu.Unlock()
			return nil, true, err
		}
		h.count++
		c.mu.Unlock()
		return h, true, nil
	}
	if st == nil {
		st = &lockState{}
		c.locks[m.name] = st
	}
	if !wait && (st.holder != nil || len(st.queue) > 0) {
		c.mu.Unlock()
		return nil, false, nil
	}
	if o == nil {
		o = anonOwner
	}
	w := &waiter{m: m, octx: octx, owner: o, ttl: m.cfg.ttl, turn: make(chan struct{}, 1)}
	st.queue = append(st.queue, w)
	c.ops.Add(1)
	c.promoteLocked(st)
	c.mu.Unlock()
	defer c.ops.Done()

	for {
		select {
		case <-w.turn:
		case <-ctx.Done():
			return nil, false, c.giveUp(ctx, m, st, w, ctx.Err())
		case <-c.ctx.Done():
			return nil, false, c.giveUp(ctx, m, st, w, ErrClosed)
		}
		c.mu.Lock()
		passed := w.passed
		c.mu.Unlock()
		if passed != nil {
			// An owner of this Client passed its hold on.
			if ctx.Err() != nil {
				_ = c.endHeld(ctx, passed)
				return nil, false, ctx.Err()
			}
			return passed, false, nil
		}
		for {
			h, again, err := c.askStore(ctx, octx, m, st, w, wait)
			if !again {
				return h, false, err
			}
		}
	}
}

// askStore makes w's request to the store, w being the first waiter and no
// owner of the Client holding the name. It returns the hold, or nil and no
// error when the lock is busy (try), or the error; or again, when a wait is
// to ask again.
func (c *Client) askStore(ctx, octx context.Context, m *Mutex, st *lockState, w *waiter, wait bool) (h *hold, again bool, err error) {
	// Close ends a call in flight.
	actx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	sent := time.Now()
	l, err := c.ask(actx, backend.Request{Name: m.name, Owner: c.newOwner(), TTL: m.cfg.ttl}, wait)
	stop()
	cancel()
	if err == nil && l == nil {
		err = errors.New("the driver returned neither a lease nor an error")
	}
	if err == nil && (ctx.Err() != nil || c.ctx.Err() != nil) {
		// Contract: a nil error means held. A grant that raced with the
		// end of ctx or with Close is given back.
		c.giveBack(ctx, l, m.cfg.releaseTimeout)
		err = ctx.Err()
		if err == nil {
			err = ErrClosed
		}
	}
	if err != nil {
		c.mu.Lock()
		c.removeLocked(m.name, st, w)
		c.mu.Unlock()
		switch {
		case !wait && errors.Is(err, backend.ErrHeld):
			return nil, false, nil
		case ctx.Err() != nil:
			return nil, false, withCtxErr(ctx, err)
		case c.ctx.Err() != nil:
			return nil, false, ErrClosed
		}
		return nil, false, err
	}
	// The driver knows when the lease it granted began: when the granting
	// request was sent (a wait can have begun long before), or earlier.
	start := sent
	if ls := l.Start(); !ls.IsZero() {
		if now := time.Now(); ls.Before(now) {
			start = ls
		} else {
			start = now
		}
	}
	if !c.caps.SessionLease && !time.Now().Before(start.Add(m.cfg.ttl-margin(m.cfg.ttl))) {
		// A grant that reaches us after its lease could have run out
		// (the process or its connection stalled while the grant was on
		// its way) is not a hold: another owner may have the lock, with a
		// higher token. Give it back, owner-checked, and ask again.
		c.cfg.logger.Warn("locker: a grant arrived after its lease could have run out; asking again", "name", m.name, "token", l.Token(), "late", time.Since(start.Add(m.cfg.ttl)))
		c.giveBack(ctx, l, m.cfg.releaseTimeout)
		if wait {
			return nil, true, nil
		}
		c.mu.Lock()
		c.removeLocked(m.name, st, w)
		c.mu.Unlock()
		return nil, false, nil
	}
	h = newHold(m, w.owner, l, c.caps, start)
	if c.cfg.observer != nil {
		h.obsCtx = octx
	}
	c.start(h)
	c.mu.Lock()
	if c.closed {
		c.removeLocked(m.name, st, w)
		c.mu.Unlock()
		c.sched.remove(h)
		c.stopWatch(h)
		c.giveBack(ctx, l, m.cfg.releaseTimeout)
		return nil, false, ErrClosed
	}
	st.holder = h
	c.removeLocked(m.name, st, w)
	m.cur, m.last = h, h
	c.mu.Unlock()
	return h, false, nil
}

// giveUp ends w's wait with err. A hold passed to w as it gave up is
// passed on, or released.
func (c *Client) giveUp(ctx context.Context, m *Mutex, st *lockState, w *waiter, err error) error {
	c.mu.Lock()
	passed := w.passed
	if passed == nil {
		c.removeLocked(m.name, st, w)
	}
	c.mu.Unlock()
	if passed != nil {
		_ = c.endHeld(ctx, passed)
	}
	return err
}

// endHeld ends a hold that its acquisition will not return: from its
// count of one.
func (c *Client) endHeld(ctx context.Context, h *hold) error {
	c.mu.Lock()
	h.ending = true
	c.mu.Unlock()
	return c.end(ctx, h)
}

// giveBack releases a lease that was granted but will not be used.
func (c *Client) giveBack(ctx context.Context, l backend.Lease, timeout time.Duration) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := l.Release(rctx); err != nil {
		c.cfg.logger.Warn("locker: releasing a grant that raced with cancellation failed", "err", err)
	}
}

// Unlock releases one level of the hold of ctx's owner: of the owner that
// ctx carries (WithOwner, Do), or, with a ctx that carries none, of a hold
// taken through this handle with a ctx that carried none (as with
// sync.Mutex, any goroutine may unlock it). The last level releases the lock
// on the store, owner-checked, or passes it to the next waiter of the same
// Client. The release runs even when ctx is already done (bounded by
// WithReleaseTimeout), so a deferred Unlock frees the lock after a
// cancellation. Unlock returns ErrNotHeld when ctx's owner holds nothing
// here, and ErrLost for each level of a hold that was lost.
func (m *Mutex) Unlock(ctx context.Context) error {
	const op = "unlock"
	if m.zero() {
		return opErr(op, "", ErrZeroMutex)
	}
	if ctx == nil {
		return opErr(op, m.name, ErrNilContext)
	}
	if m.err != nil {
		return opErr(op, m.name, m.err)
	}
	c := m.c
	o := ownerOf(ctx)
	c.mu.Lock()
	var h *hold
	if st := c.locks[m.name]; st != nil {
		h = st.holder
	}
	if h == nil || h.ending || !h.owns(o, m) {
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return opErr(op, m.name, ErrClosed)
		}
		return opErr(op, m.name, ErrNotHeld)
	}
	h.count--
	if h.count > 0 {
		c.mu.Unlock()
		return opErr(op, m.name, h.lostErr())
	}
	h.ending = true
	c.mu.Unlock()
	return opErr(op, m.name, c.end(ctx, h))
}
