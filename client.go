package locker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golocker/locker/backend"
)

// Client hands out lock handles on one driver and runs their shared
// machinery: one renewal scheduler for all holds, and the bookkeeping that
// lets Close release every hold. A Client is safe for concurrent use.
type Client struct {
	d    backend.Driver
	caps backend.Capabilities
	cfg  config

	id    string
	seq   atomic.Uint64
	sched *scheduler

	ctx    context.Context // cancelled by Close: ends waits in flight
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	holds  map[*hold]struct{}
	ops    sync.WaitGroup // acquisitions in flight
	wg     sync.WaitGroup // renewals and lost watchers

	closeOnce sync.Once
	closeErr  error
}

// New returns a Client on driver d. The options set the defaults of every
// handle (WithTTL, WithFixedLease, WithReleaseTimeout) and the Client's own
// settings (WithLogger). Close closes d.
func New(d backend.Driver, opts ...Option) (*Client, error) {
	if d == nil {
		return nil, fmt.Errorf("locker: new: %w: nil driver", ErrInvalidOption)
	}
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, fmt.Errorf("locker: new: %w", err)
	}
	cfg.clientOnly = nil
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("locker: new: %w", err)
	}
	c := &Client{
		d:     d,
		caps:  d.Capabilities(),
		cfg:   cfg,
		id:    ownerPrefix() + hex.EncodeToString(b[:]),
		holds: make(map[*hold]struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.sched = newScheduler(c.ctx, &c.wg, cfg.logger)
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
// returns the error.
func (c *Client) NewMutex(name string, opts ...Option) *Mutex {
	m := &Mutex{c: c, name: name, cfg: c.cfg}
	if err := validName(name); err != nil {
		m.err = err
		return m
	}
	if err := m.cfg.apply(opts); err != nil {
		m.err = err
	} else if len(m.cfg.clientOnly) > 0 {
		m.err = fmt.Errorf("%w: %s applies to a Client, not a Mutex", ErrInvalidOption, m.cfg.clientOnly[0])
	}
	return m
}

func (c *Client) newOwner() string {
	return c.id + "/" + strconv.FormatUint(c.seq.Add(1), 10)
}

// begin registers an operation that may create a hold; it fails once the
// Client is closed.
func (c *Client) begin() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.ops.Add(1)
	return nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// track records h as a live hold. It fails if the Client was closed while
// the hold was being granted.
func (c *Client) track(h *hold) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.holds[h] = struct{}{}
	return true
}

func (c *Client) untrack(h *hold) {
	c.mu.Lock()
	delete(c.holds, h)
	c.mu.Unlock()
}

// watchLost has the lease's loss signal declare h lost, when the lease
// can call a function on loss (backend.LostNotifier): no goroutine per
// hold. It runs before h is shared (tracked or given to the Mutex), so
// that h.stopLost is set before anything can end h.
func (c *Client) watchLost(h *hold) {
	n, ok := h.lease.(backend.LostNotifier)
	if !ok || h.lease.Lost() == nil {
		return
	}
	h.stopLost = n.AfterLost(func() {
		select {
		case <-h.ended:
			return
		default:
		}
		c.sched.remove(h)
		h.declareLost(errors.New("the store reported the hold gone"))
	})
}

// start hands a new hold to the watchdog and, when the driver can signal
// loss but watchLost did not arrange it, to a watcher goroutine that
// lasts as long as the hold.
func (c *Client) start(h *hold) {
	if h.renew || h.deadlineOnly() {
		c.sched.add(h)
	}
	if h.stopLost != nil {
		return
	}
	ch := h.lease.Lost()
	if ch != nil {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			select {
			case <-ch:
				c.sched.remove(h)
				h.declareLost(errors.New("the store reported the hold gone"))
			case <-h.ended:
			}
		}()
	}
}

// end stops the machinery of h and releases it on the store, even when ctx
// is done, within the release timeout. It returns an error wrapping ErrLost
// if the hold had been lost.
func (c *Client) end(ctx context.Context, h *hold) error {
	c.sched.remove(h)
	c.untrack(h)
	h.end()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.releaseTimeout)
	defer cancel()
	err := h.lease.Release(rctx)
	if lerr := h.lostErr(); lerr != nil {
		return lerr
	}
	return err
}

// release gives back a lease that was granted but will not be used (ctx
// ended or the Client closed while it was granted).
func (c *Client) release(ctx context.Context, l backend.Lease, timeout time.Duration) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := l.Release(rctx); err != nil {
		c.cfg.logger.Warn("locker: releasing a grant that raced with cancellation failed", "err", err)
	}
}

// Close releases every hold of the Client's handles, stops the watchdog,
// ends acquisitions in flight with ErrClosed, and closes the driver. Handles
// of a closed Client return ErrClosed. Close is idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		holds := make([]*hold, 0, len(c.holds))
		for h := range c.holds {
			holds = append(holds, h)
		}
		c.mu.Unlock()
		c.cancel()
		var errs []error
		if !waitTimeout(&c.ops, c.cfg.releaseTimeout) {
			// A driver that ignores ctx: report it rather than hang.
			errs = append(errs, fmt.Errorf("locker: close: %w: acquisitions still in flight after %v (the driver ignores ctx)", ErrClosed, c.cfg.releaseTimeout))
		}

		var wg sync.WaitGroup
		herrs := make([]error, len(holds))
		for i, h := range holds {
			h.m.detach(h)
			// Tell Do and Lost before the release, so that code running
			// under the hold stops before another owner can be granted it.
			h.declareLost(ErrClosed)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.end(context.Background(), h); err != nil && !errors.Is(err, ErrLost) {
					herrs[i] = opErr("close", h.m.name, err)
				}
			}()
		}
		wg.Wait()
		c.wg.Wait()
		errs = append(errs, herrs...)
		errs = append(errs, c.d.Close())
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
