package locker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golocker/locker/backend"
)

// Client hands out lock handles on one driver and runs their shared
// machinery: the waiting (one queue per name, see Mutex), one renewal
// scheduler for all holds, and the bookkeeping that lets Close release every
// hold. A Client is safe for concurrent use.
type Client struct {
	d       backend.Driver
	caps    backend.Capabilities
	cfg     config
	waiter  backend.Waiter  // the driver's native wait, or nil
	watcher backend.Watcher // the driver's wake-up, or nil

	id    string
	seq   atomic.Uint64
	sched *scheduler

	ctx    context.Context // cancelled by Close: ends waits in flight
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	locks  map[lockKey]*lockState
	ops    sync.WaitGroup // acquisitions in flight
	wg     sync.WaitGroup // renewals and other background work

	closeOnce sync.Once
	closeErr  error
}

// New returns a Client on driver d. The options set the defaults of every
// handle (WithTTL, WithFixedLease, WithReleaseTimeout) and the Client's own
// settings (WithLogger, WithObserver, WithLostHook). Close closes d.
func New(d backend.Driver, opts ...Option) (*Client, error) {
	if d == nil {
		return nil, errorf(ErrInvalidOption, "nil driver")
	}
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	cfg.clientOnly = nil
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	c := &Client{
		d:     d,
		caps:  d.Capabilities(),
		cfg:   cfg,
		id:    ownerPrefix() + hex.EncodeToString(b[:]),
		locks: make(map[lockKey]*lockState),
	}
	c.waiter, _ = d.(backend.Waiter)
	c.watcher, _ = d.(backend.Watcher)
	if ls, ok := d.(backend.LogSetter); ok {
		ls.SetLogger(cfg.logger)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.sched = newScheduler(c)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.sched.run()
	}()
	return c, nil
}

// ownerPrefix names this process in owner strings ("host/pid/"), so that an
// inspector's list says who holds what. The host name is cut short to keep
// owners small.
func ownerPrefix() string {
	host, _ := os.Hostname()
	if len(host) > 24 {
		host = host[:24]
	}
	return host + "/" + strconv.Itoa(os.Getpid()) + "/"
}

// Capabilities returns what the Client's driver declares.
func (c *Client) Capabilities() backend.Capabilities { return c.caps }

// Driver returns the Client's driver, for optional interfaces.
func (c *Client) Driver() backend.Driver { return c.d }

// NewMutex returns a handle on the lock name. Options override the Client's
// defaults. A bad name or option does not panic: every method of the handle
// returns the error. Handles are cheap; handles of one name on one Client
// share its waiting queue.
func (c *Client) NewMutex(name string, opts ...Option) *Mutex {
	// Without options the handle shares the Client's settings: a handle
	// costs a few words, whatever the number held at once.
	return &Mutex{hd: c.newHandle(lockKey{backend.Mutex, name}, 1, 1, opts)}
}

func (c *Client) newOwner() string {
	return c.id + "/" + strconv.FormatUint(c.seq.Add(1), 10)
}

// start hands a new hold to the watchdog and to the lease's loss signal.
// It runs before h is shared.
func (c *Client) start(h *hold) {
	if h.renew || h.fixed {
		c.sched.add(h)
	}
	if sig := h.lease.Lost(); sig != nil {
		h.stopLost = sig.AfterLost(func() {
			c.lose(h, LostStore, errors.New("the store reported the hold gone"))
		})
	}
}

// stopWatch stops the lease's loss signal from reaching h.
func (c *Client) stopWatch(h *hold) {
	if h.stopLost != nil {
		h.stopLost()
	}
}

// lose declares h lost: Lost closes, Do's ctx is cancelled, the observer
// and the lost hook hear of it. It does nothing if h is lost already.
func (c *Client) lose(h *hold, reason Reason, cause error) {
	err := cause
	if reason != Closed {
		err = fmt.Errorf("%w: %w", ErrLost, cause)
	}
	if !h.declareLost(err) {
		return
	}
	c.sched.remove(h)
	if reason != Closed && reason != LostAtRelease {
		c.cfg.logger.Warn("locker: hold lost", "name", h.hd.key.name, "kind", h.hd.key.kind, "token", h.token, "reason", string(reason), "err", cause)
	}
	c.observeEnd(h, reason, err)
}

// observeEnd tells the observer and the lost hook that h ended.
func (c *Client) observeEnd(h *hold, reason Reason, cause error) {
	obs, hook := c.cfg.observer, c.cfg.lostHook
	if reason == Released || reason == Closed {
		hook = nil
	}
	if obs == nil && hook == nil {
		return
	}
	e := HoldEnd{Name: h.hd.key.name, Kind: h.hd.key.kind, Token: h.token, Held: time.Duration(monoNow() - h.acquired), Reason: reason, Cause: cause}
	if obs != nil {
		ctx := h.obsCtx
		if ctx == nil {
			ctx = context.Background()
		}
		obs.HoldEnded(ctx, e)
	}
	if hook != nil {
		hook(e)
	}
}

// end ends h, whose last level was unlocked (or which its acquisition gave
// back): it passes the hold to the Client's next waiter for the name, or
// releases it on the store, even when ctx is done, within the release
// timeout. It returns an error wrapping ErrLost if the hold had been lost.
func (c *Client) end(ctx context.Context, h *hold) error {
	c.sched.remove(h)
	c.stopWatch(h)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.hd.cfg.releaseTimeout)
	defer cancel()
	lerr := h.lostErr()
	if lerr == nil && c.pass(rctx, h) {
		c.observeEnd(h, Released, nil)
		// The next holder is runnable: let it run now, before whatever
		// the releaser does next.
		runtime.Gosched()
		return nil
	}
	err := h.releaseLease(rctx)
	if lerr == nil && errors.Is(err, ErrLost) {
		// Nothing noticed the loss before: the release did.
		c.lose(h, LostAtRelease, storeSaysGone("the release", err))
		lerr = h.lostErr()
	}
	c.detach(h)
	if lerr != nil {
		return lerr
	}
	if err == nil {
		c.observeEnd(h, Released, nil)
	}
	return err
}

// detach forgets h, a Client's hold on its lock: the next waiter may ask
// the store, and one that asks the store for a weighted lock asks again.
func (c *Client) detach(h *hold) {
	key := h.hd.key
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.locks[key]; st != nil {
		if i := slices.Index(st.holds, h); i >= 0 {
			st.holds = slices.Delete(st.holds, i, i+1)
			if st.weighted && st.asking {
				st.queue[0].signal()
			}
			c.promoteLocked(st)
			c.dropIfIdleLocked(key, st)
		}
	}
	if h.hd.cur == h {
		h.hd.cur = nil
	}
}

// pass hands h to the first waiter of the Client for its name, through the
// driver's Passer, without freeing it on the store. It reports whether it
// did; if not, h is to be released. h is not lost.
func (c *Client) pass(ctx context.Context, h *hold) bool {
	p, ok := h.lease.(backend.Passer)
	if !ok {
		return false
	}
	key := h.hd.key
	name := key.name
	c.mu.Lock()
	st := c.locks[key]
	if c.closed || st == nil || st.weighted || len(st.holds) != 1 || st.holds[0] != h || len(st.queue) == 0 || st.asking {
		c.mu.Unlock()
		return false
	}
	w := st.queue[0]
	c.mu.Unlock()
	wm := w.hd
	l, err := h.passLease(ctx, p, wm.request(c.newOwner()))
	if err != nil {
		c.cfg.logger.Warn("locker: passing a hold failed; releasing it", "name", name, "err", err)
		return false
	}
	if l == nil {
		return false
	}
	nh := newHold(wm, w.owner, l, c.caps, l.Start())
	if c.cfg.observer != nil {
		nh.obsCtx = w.octx
	}
	c.start(nh)
	c.mu.Lock()
	if !c.closed && len(st.holds) == 1 && st.holds[0] == h && len(st.queue) > 0 && st.queue[0] == w {
		st.queue = st.queue[1:]
		st.holds[0] = nh
		w.passed = nh
		wm.cur, wm.last = nh, nh
		if h.hd.cur == h {
			h.hd.cur = nil
		}
		c.mu.Unlock()
		w.signal()
		return true
	}
	c.mu.Unlock()
	// The waiter gave up (or the Client closed) while the hold was being
	// passed: the new lease is nobody's. Release it; h's lease is spent.
	c.sched.remove(nh)
	c.stopWatch(nh)
	if err := nh.releaseLease(ctx); err != nil {
		c.cfg.logger.Warn("locker: releasing a hold passed to a waiter that left failed", "name", name, "err", err)
	}
	return false
}

// Close releases every hold of the Client's handles, stops the watchdog,
// ends acquisitions in flight with ErrClosed, and closes the driver. Handles
// of a closed Client return ErrClosed. Close is idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		var holds []*hold
		for _, st := range c.locks {
			holds = append(holds, st.holds...)
		}
		c.mu.Unlock()
		c.cancel()
		var errs []error
		if !waitTimeout(&c.ops, c.cfg.releaseTimeout) {
			// A driver that ignores ctx: report it rather than hang.
			errs = append(errs, wrap("close", errorf(ErrClosed, "acquisitions still in flight after %v (the driver ignores ctx)", c.cfg.releaseTimeout)))
		}

		var wg sync.WaitGroup
		herrs := make([]error, len(holds))
		for i, h := range holds {
			// Tell Do and Lost before the release, so that code running
			// under the hold stops before another owner can be granted it.
			c.lose(h, Closed, ErrClosed)
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.sched.remove(h)
				c.stopWatch(h)
				ctx, cancel := context.WithTimeout(context.Background(), h.hd.cfg.releaseTimeout)
				defer cancel()
				if err := h.releaseLease(ctx); err != nil && !errors.Is(err, ErrLost) {
					herrs[i] = opErr("close", h.hd.key.name, err)
				}
				c.detach(h)
			}()
		}
		wg.Wait()
		c.wg.Wait()
		errs = append(errs, herrs...)
		if err := c.d.Close(); err != nil {
			errs = append(errs, wrap("close", err))
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// waitTimeout waits for wg, at most d; it reports whether wg finished.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// LocalWaiters returns how many acquisitions of this Client are waiting for
// name: queued in the Client behind another of its owners, or waiting in
// the store. (backend.QueueInspector counts the waiters in the store, of
// every Client, one per Client and name.)
func (c *Client) LocalWaiters(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.locks[lockKey{backend.Mutex, name}]; st != nil {
		return len(st.queue)
	}
	return 0
}
