package redlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
	"github.com/golocker/locker/redislock/internal/config"
	"github.com/golocker/locker/redislock/internal/keys"
	"github.com/golocker/locker/redislock/internal/redislog"
	"github.com/golocker/locker/redislock/internal/scripts"
)

// Driver is a lock driver over N independent Redis instances, after the
// Redlock algorithm of the Redis documentation: a lock is held when a
// majority of the instances granted it within its validity, the lease
// minus the time the acquisition took and a clock-drift allowance. Losing
// fewer than half of the instances loses no lock and blocks no acquisition.
//
// Independent instances have no common counter, so RedLock has no fencing
// tokens (Token is 0), and waiters try again with jittered backoff
// (package locker's) instead of being notified. It implements
// backend.Driver and backend.Inspector, and is safe for concurrent use.
type Driver struct {
	clients   []redis.UniversalClient
	ownClient bool
	opts      config.Options
	keys      keys.Keys
	quorum    int

	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var (
	_ backend.Driver    = (*Driver)(nil)
	_ backend.Inspector = (*Driver)(nil)
	_ backend.LogSetter = (*Driver)(nil)
)

// MinInstances is the fewest instances New accepts: with fewer, a
// majority cannot survive the loss of one.
const MinInstances = 3

// New returns a Driver on clients, one per independent Redis instance
// (standalone servers, or Sentinel-managed masters; not replicas of one
// another). It needs at least MinInstances. Close does not close the
// clients.
func New(clients []redis.UniversalClient, opts ...Option) (*Driver, error) {
	if len(clients) < MinInstances {
		return nil, fmt.Errorf("redislock: redlock.New: %d instances, need at least %d", len(clients), MinInstances)
	}
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("redislock: redlock.New: client %d is nil", i)
		}
	}
	o := config.Defaults()
	if err := driverkit.Apply(&o, opts); err != nil {
		return nil, err
	}
	if err := o.Refuse("RedLock", "WithWaitReplicas", "WithBatch", "WithKeyspaceEvents"); err != nil {
		return nil, err
	}
	return newDriver(clients, o, false), nil
}

func newDriver(clients []redis.UniversalClient, o config.Options, own bool) *Driver {
	return &Driver{
		clients:   clients,
		ownClient: own,
		opts:      o,
		keys:      keys.Keys{Prefix: o.KeyPrefix},
		quorum:    len(clients)/2 + 1,
		closed:    make(chan struct{}),
	}
}

// Capabilities implements backend.Driver: leases that expire, inspection;
// no fencing (independent instances share no counter), no notification.
func (rl *Driver) Capabilities() backend.Capabilities {
	return backend.Capabilities{Expiry: true, CrossProcess: true}
}

// Key returns the Redis key of the lock name on every instance.
func (rl *Driver) Key(name string) string { return rl.keys.Lock(name) }

// Close ends the Driver's waits in flight with ErrClosed, and closes the
// clients if it opened them (Open). Close is idempotent.
func (rl *Driver) Close() error {
	rl.closeOnce.Do(func() {
		redislog.Forget(rl)
		close(rl.closed)
		if rl.ownClient {
			var errs []error
			for _, c := range rl.clients {
				errs = append(errs, c.Close())
			}
			rl.closeErr = joinErrors(errs)
		}
	})
	return rl.closeErr
}

func (rl *Driver) isClosed() bool { return driverkit.Done(rl.closed) }

// Wait bounds of a round that did not get the lock, within which package
// locker backs off: the holders' shortest remaining lease, at most
// maxWait, or retryAfter when no other owner holds it.
const (
	maxWait    = time.Second
	retryAfter = 5 * time.Millisecond
)

// drift is the allowance for the clocks of the client and the instances
// running at different rates: 1% of the lease plus 2ms, as the Redlock
// algorithm suggests.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// instanceTimeout bounds one instance's answer.
func (rl *Driver) instanceTimeout(ttl time.Duration) time.Duration {
	if rl.opts.InstanceTimeout > 0 {
		return rl.opts.InstanceTimeout
	}
	return min(max(ttl/10, 10*time.Millisecond), 250*time.Millisecond)
}

// Acquire implements backend.Driver: one round of the acquire script on
// every instance. Package locker waits, backing off at most until the
// shortest remaining lease of the instances that refused.
func (rl *Driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if rl.isClosed() {
		return nil, backend.ErrClosed
	}
	if err := backend.CheckName(r.Name); err != nil {
		return nil, err
	}
	if r.TTL <= 0 {
		return nil, fmt.Errorf("%w: %v", backend.ErrInvalidTTL, r.TTL)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l, left, err := rl.try(ctx, r)
	switch {
	case l != nil:
		return l, nil
	case err != nil:
		return nil, err
	}
	return nil, &backend.HeldError{Left: left}
}

// instanceResult is one instance's answer to a script.
type instanceResult struct {
	res any
	err error
}

// each runs f on every instance in parallel, each bounded by timeout.
func (rl *Driver) each(ctx context.Context, timeout time.Duration, f func(ctx context.Context, i int, c redis.UniversalClient) (any, error)) []instanceResult {
	out := make([]instanceResult, len(rl.clients))
	var wg sync.WaitGroup
	for i, c := range rl.clients {
		wg.Go(func() {
			ictx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			res, err := f(ictx, i, c)
			out[i] = instanceResult{res: res, err: err}
		})
	}
	wg.Wait()
	return out
}

// try asks every instance once. It returns the lease when a majority
// granted it within its validity; otherwise it releases the lock on every
// instance that granted it or may have (no answer in time), and returns
// the wait bound (the shortest remaining lease of the holders) and, when no
// other owner was seen, why the quorum failed.
func (rl *Driver) try(ctx context.Context, r backend.Request) (*lease, time.Duration, error) {
	key := rl.keys.Lock(r.Name)
	l := &lease{rl: rl, key: key, owner: r.Owner, ttl: r.TTL, start: time.Now()}
	results := rl.each(ctx, rl.instanceTimeout(r.TTL), func(ctx context.Context, _ int, c redis.UniversalClient) (any, error) {
		return scripts.Acquire.Run(ctx, c, []string{key, keys.Fence(key)}, r.Owner, scripts.MS(r.TTL), "0").Result()
	})
	validity := r.TTL - time.Since(l.start) - drift(r.TTL)
	granted, held, left := 0, 0, maxWait
	var errs []error
	undo := make([]bool, len(results))
	for i, res := range results {
		if res.err != nil {
			errs = append(errs, res.err)
			undo[i] = scripts.MayHaveRun(res.err)
			continue
		}
		a, err := scripts.ParseAcquire(res.res)
		switch {
		case err != nil:
			errs = append(errs, err)
		case a.Status != 0:
			granted++
			undo[i] = true
		default:
			held++
			left = min(left, scripts.Left(a.PTTL, maxWait))
		}
	}
	if granted >= rl.quorum && validity > 0 {
		return l, 0, nil
	}
	rl.undo(ctx, l, undo)
	switch {
	case held > 0:
		return nil, left, nil
	case granted >= rl.quorum:
		return nil, retryAfter, fmt.Errorf("redislock: a majority granted the lock only after its validity (the acquisition took longer than the lease allows)")
	}
	return nil, retryAfter, fmt.Errorf("redislock: no majority: %d of %d instances granted the lock: %w", granted, len(rl.clients), joinErrors(errs))
}

// undo releases l on the instances marked, after a failed quorum.
func (rl *Driver) undo(ctx context.Context, l *lease, marked []bool) {
	if !slices.Contains(marked, true) {
		return
	}
	cctx := context.WithoutCancel(ctx)
	rl.each(cctx, max(rl.instanceTimeout(l.ttl), 100*time.Millisecond), func(ctx context.Context, i int, c redis.UniversalClient) (any, error) {
		if !marked[i] {
			return nil, nil
		}
		return scripts.Release.Run(ctx, c, []string{l.key}, l.owner).Result()
	})
}

// lease is one hold granted by a majority.
type lease struct {
	rl    *Driver
	key   string
	owner string
	ttl   time.Duration
	start time.Time
}

// Token is 0: independent instances share no counter to fence with.
func (l *lease) Token() uint64 { return 0 }

// Start is when the acquisition that was granted began.
func (l *lease) Start() time.Time { return l.start }

// Lost returns nil: loss is found by the next renewal.
func (l *lease) Lost() *backend.LostSignal { return nil }

// Renew extends the lease on every instance that still has it; it
// succeeds when a majority did within the new validity, and reports
// ErrLost when too many instances say the lock is no longer this owner's
// for a majority to be possible.
func (l *lease) Renew(ctx context.Context, ttl time.Duration) error {
	start := time.Now()
	results := l.rl.each(ctx, l.rl.instanceTimeout(ttl), func(ctx context.Context, _ int, c redis.UniversalClient) (any, error) {
		return scripts.Renew.Run(ctx, c, []string{l.key}, l.owner, scripts.MS(ttl)).Int64()
	})
	if err := l.rl.majority(results, "renewed"); err != nil {
		return err
	}
	if time.Since(start)+drift(ttl) >= ttl {
		return fmt.Errorf("redislock: renewal took longer than the lease allows")
	}
	return nil
}

// Release frees the lock on every instance; it reports ErrLost when too
// many instances say the lock was no longer this owner's. An instance
// gets at least a second to answer: the short bound of an acquisition
// (TTL/10) serves the validity of a grant, and a release it cut short on
// a loaded machine left the lock held on the instances until its TTL.
func (l *lease) Release(ctx context.Context) error {
	results := l.rl.each(ctx, max(l.rl.instanceTimeout(l.ttl), time.Second), func(ctx context.Context, _ int, c redis.UniversalClient) (any, error) {
		return scripts.Release.Run(ctx, c, []string{l.key}, l.owner).Int64()
	})
	return l.rl.majority(results, "released")
}

// tally counts the answers of a script that answers 1 or 0 on each
// instance: the ones, the zeros, and the failures (an error, or any other
// answer).
func tally(results []instanceResult) (ones, zeros int, errs []error) {
	for _, r := range results {
		switch {
		case r.err != nil:
			errs = append(errs, closedErr(r.err))
		case r.res == int64(1):
			ones++
		case r.res == int64(0):
			zeros++
		default:
			errs = append(errs, fmt.Errorf("%w: %v", scripts.ErrReply, r.res))
		}
	}
	return ones, zeros, errs
}

// majority reads the 1/0 answers of an owner-checked script: nil when a
// majority answered 1, ErrLost when so many answered 0 that no majority
// could, else an error joining the instances' failures.
func (rl *Driver) majority(results []instanceResult, what string) error {
	ok, notOwner, errs := tally(results)
	switch {
	case ok >= rl.quorum:
		return nil
	case notOwner > len(results)-rl.quorum:
		return fmt.Errorf("%w: %d of %d instances no longer hold it", backend.ErrLost, notOwner, len(results))
	}
	return fmt.Errorf("redislock: %s on %d of %d instances, a majority is %d: %w", what, ok, len(results), rl.quorum, joinErrors(errs))
}
