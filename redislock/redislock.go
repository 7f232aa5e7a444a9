package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
)

// ErrNotReplicated is returned (wrapped) by an acquisition that fewer
// replicas acknowledged than WithWaitReplicas asked for. The lock has been
// released again.
var ErrNotReplicated = errors.New("redislock: too few replicas acknowledged the lock")

// errReply is a reply of a script that the driver does not understand: the
// key holds something else, or another program wrote it.
var errReply = errors.New("redislock: unexpected reply")

// Driver is a lock driver on one Redis deployment: a standalone server, a
// Sentinel-managed master, or a Cluster, through a go-redis
// UniversalClient. It implements backend.Driver, backend.Inspector and
// backend.QueueInspector, and is safe for concurrent use.
type Driver struct {
	client    redis.UniversalClient
	ownClient bool // opened from a URL: Close closes the client
	opts      options
	keys      keys

	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error

	waiting    sync.WaitGroup // waits in the queue, and their leaving calls
	background sync.WaitGroup // reserve.lua calls
	inboxName  string         // the channel of grants to this Driver's waiters

	mu      sync.Mutex
	waiters map[string]*waiter   // by owner
	queues  map[string][]*waiter // by name, in the order they began to wait
	chains  map[string]*chain    // by name: the Driver's holds that it may pass on (pass.go)
	early   map[string]time.Time // by name: when a "q" came before its chain began (pass.go)
	strays  map[string]stray     // by owner: waiters passed the lock while calling (pass.go)
	inbox   *inbox               // subscribed when a waiter first needs it
}

var (
	_ backend.Driver         = (*Driver)(nil)
	_ backend.Inspector      = (*Driver)(nil)
	_ backend.QueueInspector = (*Driver)(nil)
)

// New returns a Driver on client, which may be a *redis.Client (standalone
// or from redis.NewFailoverClient) or a *redis.ClusterClient. A *redis.Ring
// is refused: it shards keys and channels by itself, so the lock's keys and
// its channel would not meet. Close does not close client.
//
// Give the client ContextTimeoutEnabled: true, so that a ctx deadline also
// bounds a call stuck on the network; without it go-redis waits up to its
// ReadTimeout.
func New(client redis.UniversalClient, opts ...Option) (*Driver, error) {
	if client == nil {
		return nil, errors.New("redislock: New: nil client")
	}
	if _, ok := client.(*redis.Ring); ok {
		return nil, errors.New("redislock: New: a redis.Ring is not supported (its shards would split a lock's keys from its channel); use a Cluster")
	}
	o := defaultOptions()
	if err := o.apply(opts); err != nil {
		return nil, err
	}
	if err := o.refuse("a Redis Driver (use NewRedLock)", "WithInstanceTimeout"); err != nil {
		return nil, err
	}
	if o.waitReplicas > 0 && o.batch > 0 {
		return nil, optionError("WithBatch does not apply with WithWaitReplicas, which passes nothing")
	}
	if o.waitReplicas > 0 {
		switch client.(type) {
		case *redis.Client, *redis.ClusterClient:
		default:
			return nil, fmt.Errorf("redislock: New: WithWaitReplicas needs a *redis.Client or *redis.ClusterClient, got %T", client)
		}
	}
	return newDriver(client, o, false), nil
}

func newDriver(client redis.UniversalClient, o options, own bool) *Driver {
	return &Driver{
		client:    client,
		ownClient: own,
		opts:      o,
		keys:      keys{prefix: o.keyPrefix},
		closed:    make(chan struct{}),
		inboxName: inboxChannel(o.keyPrefix),
		waiters:   make(map[string]*waiter),
		queues:    make(map[string][]*waiter),
		chains:    make(map[string]*chain),
		early:     make(map[string]time.Time),
		strays:    make(map[string]stray),
	}
}

// Capabilities implements backend.Driver: fencing tokens from a per-name
// counter, a queue of waiters in Redis that a release hands the lock to in
// order, telling the waiter's Driver by pub/sub (or that the Driver passes
// to its own next waiter, pass.go); leases that expire; inspection. Loss
// is found by the next renewal (no push signal). With WithBatch, waiters
// of different Drivers are not served in arrival order: no FIFO.
func (d *Driver) Capabilities() backend.Capabilities {
	return backend.Capabilities{
		Fencing:      true,
		Notify:       true,
		FIFO:         d.opts.batch == 0,
		Expiry:       true,
		Inspect:      true,
		CrossProcess: true,
	}
}

// Key returns the Redis key of the lock name: the hash that holds the
// owner and the fencing token while the lock is held.
func (d *Driver) Key(name string) string { return d.keys.lock(name) }

// Close ends the Driver's waits in flight with ErrClosed, waits for them
// to leave the locks' queues in Redis, ends its pub/sub connection, and
// closes the client if the Driver opened it (Open). Holds stay until
// released or expired. Close is idempotent.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		d.mu.Lock()
		close(d.closed) // under d.mu: no join after this sees the Driver open
		b := d.inbox
		d.mu.Unlock()
		d.waiting.Wait()
		d.background.Wait()
		if b != nil {
			b.stop()
		}
		if d.ownClient {
			d.closeErr = d.client.Close()
		}
	})
	return d.closeErr
}

func (d *Driver) isClosed() bool {
	select {
	case <-d.closed:
		return true
	default:
		return false
	}
}

// Acquire implements backend.Driver.
func (d *Driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	if err := validName(r.Name); err != nil {
		return nil, err
	}
	if r.TTL <= 0 {
		return nil, fmt.Errorf("%w: %v", backend.ErrInvalidTTL, r.TTL)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !r.Wait {
		t, err := d.try(ctx, r, false, "")
		if err != nil {
			return nil, err
		}
		if t.l == nil {
			return nil, backend.ErrHeld
		}
		d.startChain(t.l, t.last, false)
		return t.l, nil
	}
	return d.wait(ctx, r)
}

// try runs the acquire script once. It returns the lease when granted
// (already: the owner held it before this call, handed it while it
// waited), or the holder's remaining lease (maxWait when unknown) when
// held. With queue, a held lock puts the owner in its queue, or renews its
// place there, with inbox as the channel to tell it of a grant ("": none,
// the waiter polls), and mine tells whether only this Driver's waiters
// are ahead of it; the caller leaves the queue when it gives up.
// Without, a call that failed but may have run is undone before try
// returns.
func (d *Driver) try(ctx context.Context, r backend.Request, queue bool, inbox string) (t tried, err error) {
	key := d.keys.lock(r.Name)
	l := d.newLease(r, key)
	mode := "0"
	if queue {
		mode = "1"
	}
	args := []any{r.Owner, ms(r.TTL), mode, ms(placeWindow(r.TTL)), inbox}
	var res any
	cleaned := false
	if d.opts.waitReplicas > 0 {
		res, cleaned, err = d.acquireReplicated(ctx, l, args)
	} else {
		res, err = queueAcquireScript.Run(ctx, d.client, scriptKeys(key), args...).Result()
	}
	if err != nil {
		if !queue && !cleaned && mayHaveRun(err) {
			d.cleanup(ctx, l)
		}
		return tried{}, storeErr(err)
	}
	a, err := parseAcquire(res)
	if err != nil {
		return tried{}, err
	}
	if a.status == 0 {
		return tried{left: pttl(a.n), mine: a.m == 1}, nil
	}
	l.token = uint64(a.n)
	return tried{l: l, already: a.status == 2, last: uint64(max(a.m, 0))}, nil
}

// tried is what one try found: a lease, or how long the holder's lease
// has left and whether only this Driver's waiters are ahead in the queue.
type tried struct {
	l       *lease
	already bool
	last    uint64 // the last token reserved with the grant
	left    time.Duration
	mine    bool
}

// cleanup releases by owner a grant that may have happened while the call
// that asked for it failed, and takes the owner out of the queue, with a
// ctx that is not the caller's.
func (d *Driver) cleanup(ctx context.Context, l *lease) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, _ = l.release(cctx, true)
}

// acquireReply is an acquire script's {status, n, m}: status 0 is held
// (n is the holder's pttl, m is 1 when only the caller's Driver's waiters
// are ahead of it), 1 granted by this call, 2 (the queued script) held
// already by the caller; when granted, n is the token and m the last
// token reserved for the caller's Driver (0 or absent: none).
type acquireReply struct{ status, n, m int64 }

func parseAcquire(res any) (acquireReply, error) {
	a, ok := res.([]any)
	if ok && (len(a) == 2 || len(a) == 3) {
		g, ok1 := a[0].(int64)
		v, ok2 := a[1].(int64)
		var m int64
		ok3 := true
		if len(a) == 3 {
			m, ok3 = a[2].(int64)
		}
		if ok1 && ok2 && ok3 && g >= 0 && g <= 2 {
			return acquireReply{g, v, m}, nil
		}
	}
	return acquireReply{}, fmt.Errorf("%w from the acquire script: %v", errReply, res)
}

// pttl turns the holder's PTTL into a wait bound: maxWait when the key has
// no expiry (-1) or is gone (-2).
func pttl(n int64) time.Duration {
	if n < 0 {
		return maxWait
	}
	return time.Duration(n) * time.Millisecond
}

// ms is d in whole milliseconds, rounded up: Redis leases are in ms.
func ms(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// mayHaveRun reports whether a failed call may still have run on the server:
// anything but an error reply (a timeout, a cancelled ctx, a broken
// connection after the request was written).
func mayHaveRun(err error) bool {
	var re redis.Error
	return !errors.As(err, &re) && !errors.Is(err, redis.ErrClosed)
}

// storeErr marks errors of a closed client as backend.ErrClosed.
func storeErr(err error) error {
	if errors.Is(err, redis.ErrClosed) && !errors.Is(err, backend.ErrClosed) {
		return fmt.Errorf("%w: %w", backend.ErrClosed, err)
	}
	return err
}

// retryable reports whether a waiting Acquire should try again after err:
// network trouble and the replies Redis gives while it fails over, loads or
// reshards, but not a script, type or permission error, which would only
// repeat.
func retryable(err error) bool {
	if errors.Is(err, backend.ErrClosed) || errors.Is(err, ErrNotReplicated) || errors.Is(err, errReply) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return true
	}
	for _, p := range []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK", "BUSY", "NOREPLICAS"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}
