package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/redislock" // also registers redis:// for locker.Open
)

// Library names, as the benchmarks and the table use them.
const (
	Golocker = "golocker"
	Redsync  = "redsync"
	BSM      = "bsmredislock"
)

// PeerTTL is the lease the peers' locks are taken with. golocker keeps its
// default (locker.DefaultTTL, renewed by its watchdog).
const PeerTTL = 10 * time.Second

// Handle is one contender: one owner of the lock. Each handle is used by
// one goroutine at a time.
type Handle interface {
	// Lock waits until the lock is held or ctx ends.
	Lock(ctx context.Context) error
	// Unlock releases the hold.
	Unlock(ctx context.Context) error
}

// Set is the handles of one configuration and what to close after them.
type Set struct {
	Handles []Handle
	closers []func() error
}

// Close closes every client the set opened.
func (s *Set) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	return errors.Join(errs...)
}

// Config is one library in one configuration.
type Config struct {
	Name    string // e.g. "golocker-own", "redsync-5ms": unique, used in benchmark names
	Library string // Golocker, Redsync or BSM
	// Open returns n handles on the lock name, on the Redis at addr. A
	// waiting Lock must be able to wait at least maxWait (the peers'
	// retry counts are derived from it).
	Open func(ctx context.Context, addr, name string, n int, maxWait time.Duration) (*Set, error)
}

// Configs returns every configuration, golocker's first.
func Configs() []Config {
	cs := []Config{
		{Name: "golocker-own", Library: Golocker, Open: openGolocker(false, "")},
		{Name: "golocker-shared", Library: Golocker, Open: openGolocker(true, "")},
		// Bounded overtaking across processes (redislock.WithBatch): not
		// FIFO, so not golocker's default.
		{Name: "golocker-batch16", Library: Golocker, Open: openGolocker(true, "?batch=16")},
	}
	for _, d := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 0} {
		name := "redsync-default"
		if d > 0 {
			name = "redsync-" + d.String()
		}
		cs = append(cs, Config{Name: name, Library: Redsync, Open: openRedsync(d)})
	}
	for _, d := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond} {
		cs = append(cs, Config{Name: "bsm-linear-" + d.String(), Library: BSM, Open: openBSM(func() bsm.RetryStrategy { return bsm.LinearBackoff(d) })})
	}
	cs = append(cs, Config{Name: "bsm-exp-1ms-64ms", Library: BSM, Open: openBSM(func() bsm.RetryStrategy {
		return bsm.ExponentialBackoff(time.Millisecond, 64*time.Millisecond)
	})})
	return cs
}

// ConfigByName returns the configuration called name.
func ConfigByName(name string) (Config, bool) {
	for _, c := range Configs() {
		if c.Name == name {
			return c, true
		}
	}
	return Config{}, false
}

// openGolocker opens golocker with its default options (TTL 30s, renewal
// on) and the URL query given: one Client per handle, so each has its own
// connections as separate processes would, or one Client shared by every
// handle.
func openGolocker(shared bool, query string) func(ctx context.Context, addr, name string, n int, _ time.Duration) (*Set, error) {
	return openGolockerAt(shared, func(addr, _ string) string { return "redis://" + addr + query })
}

// openGolockerAt opens golocker on the URL that url makes of the target and
// the lock name, with one Client per handle or one shared by every handle.
func openGolockerAt(shared bool, url func(target, name string) string) func(ctx context.Context, target, name string, n int, _ time.Duration) (*Set, error) {
	return func(ctx context.Context, target, name string, n int, _ time.Duration) (*Set, error) {
		u := url(target, name) // once: every Client of the Set on the same URL
		return openSet(n, shared, func() (*locker.Client, func() error, error) {
			c, err := locker.Open(ctx, u)
			if err != nil {
				return nil, nil, err
			}
			return c, c.Close, nil
		}, func(s *Set, c *locker.Client) error {
			s.Handles = append(s.Handles, golockerHandle{c.NewMutex(name)})
			return nil
		})
	}
}

// openSet returns a Set of n handles that newHandle adds on connections
// that dial opens (returning how to close them): one connection per
// handle, or one shared by every handle. Set.Close closes them.
func openSet[C any](n int, shared bool, dial func() (C, func() error, error), newHandle func(s *Set, c C) error) (*Set, error) {
	s := &Set{}
	var c C
	for i := range n {
		if i == 0 || !shared {
			conn, closeConn, err := dial()
			if err != nil {
				_ = s.Close()
				return nil, err
			}
			c = conn
			s.closers = append(s.closers, closeConn)
		}
		if err := newHandle(s, c); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

// OpenDriver returns a handle that uses golocker's Redis driver directly
// (backend.Driver: one Acquire, then Release), without package
// locker's Client and Mutex: reentrancy, the watchdog and bookkeeping are
// left out. Comparing it with a Mutex shows what package locker costs.
func OpenDriver(ctx context.Context, addr, name string) (Handle, func() error, error) {
	d, err := redislock.Open(ctx, "redis://"+addr)
	if err != nil {
		return nil, nil, err
	}
	return &driverHandle{d: d, name: name}, d.Close, nil
}

// OpenBackendDriver opens golocker's driver of a backend other than
// Redis, on its target, with default options, for a handle on lock name
// that uses the driver directly (Acquire and Release, without package
// locker).
func OpenBackendDriver(ctx context.Context, backend, target, name string) (Handle, func() error, error) {
	c, err := locker.Open(ctx, golockerURL(backend, target, name))
	if err != nil {
		return nil, nil, err
	}
	return &driverHandle{d: c.Driver(), name: name}, c.Close, nil
}

// held is what a handle's Lock obtained (a driver's lease, a bsm lock)
// until its Unlock releases it.
type held struct {
	r interface{ Release(context.Context) error }
}

// hold keeps r, unless err says the Lock that returned it failed.
func (h *held) hold(r interface{ Release(context.Context) error }, err error) error {
	if err != nil {
		return err
	}
	h.r = r
	return nil
}

// release releases what the last Lock obtained; lib names the library in
// the error when there is nothing to release.
func (h *held) release(ctx context.Context, lib string) error {
	if h.r == nil {
		return fmt.Errorf("%s: unlock: not held", lib)
	}
	err := h.r.Release(ctx)
	h.r = nil
	return err
}

type driverHandle struct {
	d    backend.Driver
	name string
	n    int
	held
}

func (h *driverHandle) Lock(ctx context.Context) error {
	h.n++
	// One attempt: the driver handle is only used uncontended (the wait
	// itself is package locker's since SPI v2).
	return h.hold(h.d.Acquire(ctx, backend.Request{Name: h.name, Owner: "bench-driver/" + strconv.Itoa(h.n), TTL: locker.DefaultTTL}))
}

func (h *driverHandle) Unlock(ctx context.Context) error { return h.release(ctx, "driver") }

type golockerHandle struct{ m *locker.Mutex }

func (h golockerHandle) Lock(ctx context.Context) error   { return h.m.Lock(ctx) }
func (h golockerHandle) Unlock(ctx context.Context) error { return h.m.Unlock(ctx) }

// newGoRedis returns a go-redis client with its default options, one per
// peer handle: a peer's state is all in Redis, so its handles are
// independent, as in separate processes.
func newGoRedis(addr string) *redis.Client { return redis.NewClient(&redis.Options{Addr: addr}) }

// openRedsync opens redsync mutexes with an expiry of PeerTTL and a fixed
// retry delay, or redsync's default delay (random 50-250ms) when delay is
// 0. The number of tries is enough to wait maxWait.
func openRedsync(delay time.Duration) func(ctx context.Context, addr, name string, n int, maxWait time.Duration) (*Set, error) {
	return func(ctx context.Context, addr, name string, n int, maxWait time.Duration) (*Set, error) {
		minDelay := delay
		if delay == 0 {
			minDelay = 50 * time.Millisecond // redsync's default is random in [50ms, 250ms)
		}
		tries := int(maxWait/minDelay) + 2
		s := &Set{}
		for i := 0; i < n; i++ {
			rdb := newGoRedis(addr)
			s.closers = append(s.closers, rdb.Close)
			opts := []redsync.Option{redsync.WithTries(tries), redsync.WithExpiry(PeerTTL)}
			if delay > 0 {
				opts = append(opts, redsync.WithRetryDelay(delay))
			}
			m := redsync.New(goredis.NewPool(rdb)).NewMutex("bench:"+name, opts...)
			s.Handles = append(s.Handles, redsyncHandle{m})
		}
		return s, nil
	}
}

type redsyncHandle struct{ m *redsync.Mutex }

func (h redsyncHandle) Lock(ctx context.Context) error {
	err := h.m.LockContext(ctx)
	if err != nil && ctx.Err() != nil {
		return ctx.Err() // redsync says ErrFailed when ctx ends
	}
	return err
}

func (h redsyncHandle) Unlock(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	if err == nil && !ok {
		return errors.New("redsync: unlock: not released")
	}
	return err
}

// openBSM opens bsm/redislock clients that obtain with a lease of PeerTTL
// and a fresh retry strategy from retry on every Obtain (an exponential
// strategy keeps its count). The wait is bounded by the ctx of Lock.
func openBSM(retry func() bsm.RetryStrategy) func(ctx context.Context, addr, name string, n int, _ time.Duration) (*Set, error) {
	return func(ctx context.Context, addr, name string, n int, _ time.Duration) (*Set, error) {
		s := &Set{}
		for i := 0; i < n; i++ {
			rdb := newGoRedis(addr)
			s.closers = append(s.closers, rdb.Close)
			s.Handles = append(s.Handles, &bsmHandle{c: bsm.New(rdb), key: "bench:" + name, retry: retry})
		}
		return s, nil
	}
}

type bsmHandle struct {
	c     *bsm.Client
	key   string
	retry func() bsm.RetryStrategy
	held
}

func (h *bsmHandle) Lock(ctx context.Context) error {
	return h.hold(h.c.Obtain(ctx, h.key, PeerTTL, &bsm.Options{RetryStrategy: h.retry()}))
}

func (h *bsmHandle) Unlock(ctx context.Context) error { return h.release(ctx, "bsm") }
