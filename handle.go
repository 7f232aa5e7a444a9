package locker

import (
	"context"
	"errors"
	"time"

	"github.com/golocker/locker/backend"
)

// Kind is the primitive a name belongs to: Mutex, Semaphore or RWMutex
// (backend.Kind). A name is a lock of its own in each kind.
type Kind = backend.Kind

// lockKey is a lock of a Client: a name of a kind.
type lockKey struct {
	kind backend.Kind
	name string
}

// handle is what every handle (Mutex, either side of an RWMutex, a
// Semaphore's acquisitions) has: its Client, the lock, how much of the
// lock's limit a hold through it takes, and its options. The generic
// acquisition and release live here, once for every primitive.
type handle struct {
	c      *Client
	key    lockKey
	limit  int64   // the name's units (backend.Request.Limit)
	weight int64   // what a hold through this handle takes
	read   bool    // the read side of an RWMutex
	pair   *handle // an RWMutex's other side, whose anonymous holds are this one's too
	value  string  // stored with a hold through it (an Election's candidate)
	cfg    *config
	err    error // from the constructor: returned by every method

	// Guarded by c.mu.
	cur  *hold // the hold taken through this handle, until its last release
	last *hold // the most recent, for Lost after Unlock
}

// newHandle returns a handle of c on key with the Client's settings, or
// with opts over them; a bad name or option is recorded in err.
func (c *Client) newHandle(key lockKey, limit, weight int64, opts []Option) handle {
	hd := handle{c: c, key: key, limit: limit, weight: weight, cfg: &c.cfg}
	if err := backend.CheckName(key.name); err != nil {
		hd.err = err
		return hd
	}
	if key.kind != backend.Mutex && !c.caps.Weighted {
		hd.err = errorf(ErrNotSupported, "the driver has no %ss (it does not declare Capabilities.Weighted)", key.kind)
		return hd
	}
	if len(opts) == 0 {
		return hd
	}
	cfg := c.cfg
	if err := cfg.apply(opts); err != nil {
		hd.err = err
	} else if len(cfg.clientOnly) > 0 {
		hd.err = errorf(ErrInvalidOption, "%s applies to a Client, not a %s", cfg.clientOnly[0], key.kind)
	}
	hd.cfg = &cfg
	return hd
}

func (hd *handle) weighted() bool { return hd.key.kind != backend.Mutex }

// request returns the store request of an acquisition through hd.
func (hd *handle) request(owner string) backend.Request {
	return backend.Request{Name: hd.key.name, Owner: owner, TTL: hd.cfg.ttl, Kind: hd.key.kind, Limit: hd.limit, Weight: hd.weight, Value: hd.value}
}

// latest returns the current hold, or else the one just released; nil
// before the first.
func (hd *handle) latest() *hold {
	hd.c.mu.Lock()
	defer hd.c.mu.Unlock()
	if hd.cur != nil {
		return hd.cur
	}
	return hd.last
}

// lockOp is every acquisition: Lock, TryLock or LockTimeout (timeout > 0)
// and their forms of the other primitives, named op. o is the owner that
// acquires: ctx's unless fresh (a Semaphore's permits, each its own). It
// reports whether the lock is held, and the hold.
func (hd *handle) lockOp(ctx context.Context, op string, wait bool, timeout time.Duration, fresh *owner) (bool, *hold, error) {
	if ctx == nil {
		return false, nil, opErr(op, hd.key.name, ErrNilContext)
	}
	c := hd.c
	obs := c.cfg.observer
	start := time.Now()
	o := fresh
	if o == nil {
		o = ownerOf(ctx)
	}
	w := &waiter{hd: hd, octx: ctx, owner: o}
	if obs != nil {
		w.octx = obs.AcquireStarted(ctx, AcquireStart{Name: hd.key.name, Op: op, Kind: hd.key.kind, Reentry: c.wouldReenter(o, hd.key)})
	}
	var h *hold
	var reentered bool
	var err error
	if hd.err != nil {
		err = hd.err
	} else {
		actx := w.octx
		if timeout > 0 {
			var cancel context.CancelFunc
			actx, cancel = context.WithTimeout(actx, timeout)
			defer cancel()
		}
		h, reentered, err = hd.acquire(actx, w, wait)
		if err != nil && timeout > 0 && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && waitEnded(actx, start.Add(timeout)) {
			// The wait ran out: not an error.
			err = nil
		}
	}
	if obs != nil {
		e := AcquireEnd{Name: hd.key.name, Op: op, Kind: hd.key.kind, Reentry: reentered, Wait: time.Since(start), Err: err}
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
		obs.AcquireEnded(w.octx, e)
	}
	return h != nil, h, opErr(op, hd.key.name, err)
}

// waitEnded reports whether a DeadlineExceeded from a wait means the wait
// ran out: ctx is done, or the deadline is (nearly) reached — some clients
// (the MongoDB driver) end a call a little before its ctx's timer fires.
// A DeadlineExceeded long before the deadline is a store error instead.
func waitEnded(ctx context.Context, deadline time.Time) bool {
	return ctx.Err() != nil || time.Until(deadline) < 10*time.Millisecond
}

// wouldReenter reports whether o holds the lock key.
func (c *Client) wouldReenter(o *owner, key lockKey) bool {
	if o == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.locks[key]
	return st != nil && st.heldBy(o) != nil
}

// reenterLocked re-enters h, the hold of w's owner, as hd asks: one more
// level of the same kind (a read level on the read side of an RWMutex,
// which a write hold grants too). A write asked of an owner that holds
// only reads is refused: it would wait for itself. c.mu is held.
func (hd *handle) reenterLocked(h *hold) error {
	if err := h.lostErr(); err != nil {
		return err
	}
	switch {
	case hd.read:
		h.reads++
	case h.levels == 0:
		return ErrUpgrade
	default:
		h.levels++
	}
	return nil
}

// acquire takes hd's lock for w's owner: it re-enters a hold of that owner,
// or queues behind the Client's other acquisitions of the lock and then
// asks the store. It returns a nil hold and no error when the lock is busy
// and wait is false.
func (hd *handle) acquire(ctx context.Context, w *waiter, wait bool) (h *hold, reentered bool, err error) {
	c := hd.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, false, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		c.mu.Unlock()
		return nil, false, err
	}
	st := c.locks[hd.key]
	if st != nil && w.owner != nil {
		if h := st.heldBy(w.owner); h != nil {
			err := hd.reenterLocked(h)
			c.mu.Unlock()
			if err != nil {
				return nil, true, err
			}
			return h, true, nil
		}
	}
	if st == nil {
		st = &lockState{weighted: hd.weighted()}
		c.locks[hd.key] = st
	}
	if !wait && (len(st.queue) > 0 || !st.weighted && len(st.holds) > 0) {
		c.mu.Unlock()
		return nil, false, nil
	}
	if w.owner == nil {
		w.owner = anonOwner
	}
	w.turn = make(chan struct{}, 1)
	st.queue = append(st.queue, w)
	c.ops.Add(1)
	c.promoteLocked(st)
	c.mu.Unlock()
	defer c.ops.Done()

	for {
		select {
		case <-w.turn:
		case <-ctx.Done():
			return nil, false, c.giveUp(ctx, st, w, ctx.Err())
		case <-c.ctx.Done():
			return nil, false, c.giveUp(ctx, st, w, ErrClosed)
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
			h, again, err := c.askStore(ctx, st, w, wait)
			if !again {
				return h, false, err
			}
		}
	}
}

// askStore makes w's request to the store, w being the first waiter (and,
// for a Mutex, no owner of the Client holding the name). It returns the
// hold, or nil and no error when the lock is busy (try), or the error; or
// again, when a wait is to ask again.
func (c *Client) askStore(ctx context.Context, st *lockState, w *waiter, wait bool) (h *hold, again bool, err error) {
	hd := w.hd
	// Close ends a call in flight.
	actx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	sent := time.Now()
	l, err := c.ask(actx, hd.request(c.newOwner()), wait, w.turn)
	stop()
	cancel()
	if err == nil && l == nil {
		err = errors.New("the driver returned neither a lease nor an error")
	}
	if err == nil && (ctx.Err() != nil || c.ctx.Err() != nil) {
		// Contract: a nil error means held. A grant that raced with the
		// end of ctx or with Close is given back.
		c.giveBack(ctx, l, hd.cfg.releaseTimeout)
		err = ctx.Err()
		if err == nil {
			err = ErrClosed
		}
	}
	if err != nil {
		c.mu.Lock()
		c.removeLocked(hd.key, st, w)
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
	ttl := hd.cfg.ttl
	if !c.caps.SessionLease && !time.Now().Before(start.Add(ttl-margin(ttl))) {
		// A grant that reaches us after its lease could have run out
		// (the process or its connection stalled while the grant was on
		// its way) is not a hold: another owner may have the lock, with a
		// higher token. Give it back, owner-checked, and ask again.
		c.cfg.logger.Warn("locker: a grant arrived after its lease could have run out; asking again", "name", hd.key.name, "token", l.Token(), "late", time.Since(start.Add(ttl)))
		c.giveBack(ctx, l, hd.cfg.releaseTimeout)
		if wait {
			return nil, true, nil
		}
		c.mu.Lock()
		c.removeLocked(hd.key, st, w)
		c.mu.Unlock()
		return nil, false, nil
	}
	h = newHold(hd, w.owner, l, c.caps, start)
	if c.cfg.observer != nil {
		h.obsCtx = w.octx
	}
	c.start(h)
	c.mu.Lock()
	if c.closed {
		c.removeLocked(hd.key, st, w)
		c.mu.Unlock()
		c.sched.remove(h)
		c.stopWatch(h)
		c.giveBack(ctx, l, hd.cfg.releaseTimeout)
		return nil, false, ErrClosed
	}
	st.holds = append(st.holds, h)
	c.removeLocked(hd.key, st, w)
	hd.cur, hd.last = h, h
	c.mu.Unlock()
	return h, false, nil
}

// giveUp ends w's wait with err. A hold passed to w as it gave up is
// passed on, or released.
func (c *Client) giveUp(ctx context.Context, st *lockState, w *waiter, err error) error {
	c.mu.Lock()
	passed := w.passed
	if passed == nil {
		c.removeLocked(w.hd.key, st, w)
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

// unlockOp releases one level of the hold of ctx's owner through hd (a
// read level on the read side of an RWMutex): of the owner that ctx
// carries, or, with a ctx that carries none, of a hold taken through hd
// with a ctx that carried none. The last level releases the hold on the
// store (or passes it to the next waiter of the Client); the last write
// level of an RWMutex hold that still has read levels downgrades it.
func (hd *handle) unlockOp(ctx context.Context, op string) error {
	if ctx == nil {
		return opErr(op, hd.key.name, ErrNilContext)
	}
	if hd.err != nil {
		return opErr(op, hd.key.name, hd.err)
	}
	c := hd.c
	o := ownerOf(ctx)
	c.mu.Lock()
	var h *hold
	if st := c.locks[hd.key]; st != nil {
		h = st.ownedBy(o, hd)
	}
	if h == nil {
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return opErr(op, hd.key.name, ErrClosed)
		}
		return opErr(op, hd.key.name, ErrNotHeld)
	}
	if hd.read {
		h.reads--
	} else {
		h.levels--
	}
	switch {
	case h.levels > 0 || hd.read && h.reads > 0:
		c.mu.Unlock()
		return opErr(op, hd.key.name, h.lostErr())
	case h.reads > 0:
		// The last write level of a hold that still reads.
		c.mu.Unlock()
		return opErr(op, hd.key.name, c.downgrade(ctx, h))
	}
	h.ending = true
	c.mu.Unlock()
	return opErr(op, hd.key.name, c.end(ctx, h))
}

// downgrade lowers h, which holds no write level any more, to a read hold
// on the store. If the store fails, h stays a write hold there (it
// excludes more than it needs to) until it ends.
func (c *Client) downgrade(ctx context.Context, h *hold) error {
	if err := h.lostErr(); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.hd.cfg.releaseTimeout)
	defer cancel()
	err := h.downgradeLease(rctx, 1)
	if errors.Is(err, ErrLost) {
		c.lose(h, LostAtRelease, storeSaysGone("the downgrade", err))
		return h.lostErr()
	}
	return err
}
