package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
	"github.com/golocker/locker/redislock/internal/chain"
	"github.com/golocker/locker/redislock/internal/coalesce"
	"github.com/golocker/locker/redislock/internal/config"
	"github.com/golocker/locker/redislock/internal/inbox"
	"github.com/golocker/locker/redislock/internal/keys"
	"github.com/golocker/locker/redislock/internal/keyspace"
	"github.com/golocker/locker/redislock/internal/redislog"
	"github.com/golocker/locker/redislock/internal/scripts"
)

// ErrNotReplicated is returned (wrapped) by an acquisition that fewer
// replicas acknowledged than WithWaitReplicas asked for. The lock has been
// released again.
var ErrNotReplicated = errors.New("redislock: too few replicas acknowledged the lock")

// Driver is a lock driver on one Redis deployment: a standalone server, a
// Sentinel-managed master, or a Cluster, through a go-redis
// UniversalClient. It implements backend.Driver, backend.Waiter,
// backend.Inspector, backend.QueueInspector and backend.BatchRenewer; its
// leases implement backend.Passer. It is safe for concurrent use.
type Driver struct {
	client    redis.UniversalClient
	ownClient bool   // opened from a URL: Close closes the client
	addr      string // what errors name: the server(s) tried
	opts      config.Options
	keys      keys.Keys
	dials     *config.DialLog     // the last dial error of a client the Driver opened
	acquires  *coalesce.Coalescer // the acquire script's calls
	chains    *chain.Set          // the holds the Driver may pass on
	inbox     *inbox.Inbox        // the channel of grants to the Driver's waiters
	watch     *keyspace.Watcher   // the keys of the holds; nil without keyspace events

	// mu orders Close's closing of closed before its waits for the
	// waits and the background calls: a wait or a call starts under mu
	// only while the Driver is open.
	mu         sync.Mutex
	closed     chan struct{}
	waiting    sync.WaitGroup // waits in the queue, and their leaving calls
	background sync.WaitGroup // reserve.lua calls, clean-ups of failed calls
	closeOnce  sync.Once
	closeErr   error
}

var (
	_ backend.Driver         = (*Driver)(nil)
	_ backend.Waiter         = (*Driver)(nil)
	_ backend.Inspector      = (*Driver)(nil)
	_ backend.QueueInspector = (*Driver)(nil)
	_ backend.BatchRenewer   = (*Driver)(nil)
	_ backend.LogSetter      = (*Driver)(nil)
	_ backend.Passer         = (*lease)(nil)
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
	o := config.Defaults()
	if err := driverkit.Apply(&o, opts); err != nil {
		return nil, err
	}
	if err := o.Refuse("a Redis Driver (use redlock.New)", "WithInstanceTimeout"); err != nil {
		return nil, err
	}
	if o.WaitReplicas > 0 && o.Batch > 0 {
		return nil, config.BadOption("WithBatch does not apply with WithWaitReplicas, which passes nothing")
	}
	if o.WaitReplicas > 0 {
		switch client.(type) {
		case *redis.Client, *redis.ClusterClient:
		default:
			return nil, fmt.Errorf("redislock: New: WithWaitReplicas needs a *redis.Client or *redis.ClusterClient, got %T", client)
		}
	}
	d := newDriver(client, o, false)
	if o.KeyspaceEvents != nil && *o.KeyspaceEvents {
		d.watchKeys()
	}
	return d, nil
}

// newDriver returns a Driver that does not watch its keys: the caller
// calls watchKeys when the servers publish keyspace events.
func newDriver(client redis.UniversalClient, o config.Options, own bool) *Driver {
	d := &Driver{
		client:    client,
		ownClient: own,
		addr:      addrOf(client),
		opts:      o,
		keys:      keys.Keys{Prefix: o.KeyPrefix},
		acquires:  coalesce.New(client, scripts.QueueAcquire, directCalls, cleanupTimeout),
		chains:    chain.NewSet(earlyQueued),
		closed:    make(chan struct{}),
	}
	d.inbox = inbox.New(client, o.KeyPrefix, d.onQueued, d.chains.Reconnected)
	return d
}

// watchKeys makes the Driver watch the keys of its holds.
func (d *Driver) watchKeys() { d.watch = keyspace.New(d.client, d.goneInRedis) }

// directCalls is how many acquire scripts a Driver sends at a time as
// calls of their own: the calls beyond share pipelines (package coalesce).
const directCalls = 4

// addrOf describes the servers of client for errors: "redis 10.0.0.5:6379",
// "redis cluster h1:6379,h2:6379".
func addrOf(client redis.UniversalClient) string {
	switch c := client.(type) {
	case *redis.Client:
		return "redis " + c.Options().Addr
	case *redis.ClusterClient:
		return "redis cluster " + strings.Join(c.Options().Addrs, ",")
	}
	return "redis"
}

// Capabilities implements backend.Driver: fencing tokens from a per-name
// counter, a queue of waiters in Redis that a release hands the lock to in
// order, telling the waiter's Driver by pub/sub; leases that expire. With
// the servers' keyspace events (WithKeyspaceEvents), a hold whose key is
// deleted is reported lost at once (LostSignal); without, the next
// renewal finds it. With WithBatch, waiters of different Drivers are not
// served in arrival order: no FIFO.
func (d *Driver) Capabilities() backend.Capabilities {
	return backend.Capabilities{
		Fencing:      true,
		Notify:       true,
		FIFO:         d.opts.Batch == 0,
		LostSignal:   d.watch != nil,
		Expiry:       true,
		CrossProcess: true,
	}
}

// Key returns the Redis key of the lock name: the hash that holds the
// owner and the fencing token while the lock is held.
func (d *Driver) Key(name string) string { return d.keys.Lock(name) }

// Close ends the Driver's waits in flight with ErrClosed, waits for them
// to leave the locks' queues in Redis, ends its pub/sub connection, and
// closes the client if the Driver opened it (Open). Holds stay until
// released or expired. Close is idempotent.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		redislog.Forget(d)
		d.mu.Lock()
		close(d.closed) // under d.mu: no wait or background call starts after this
		d.mu.Unlock()
		d.acquires.Close() // its callers' clean-ups join background
		d.waiting.Wait()
		d.background.Wait()
		d.inbox.Close()
		if d.watch != nil {
			d.watch.Close()
		}
		if d.ownClient {
			d.closeErr = d.client.Close()
			if errors.Is(d.closeErr, net.ErrClosed) {
				// A connection the network (or a test's FaultNet) had
				// closed already: nothing is left open.
				d.closeErr = nil
			}
		}
	})
	return d.closeErr
}

func (d *Driver) isClosed() bool { return driverkit.Done(d.closed) }

// start counts a wait or a background call in wg, unless the Driver is
// closed: it then reports false, and the caller starts nothing.
func (d *Driver) start(wg *sync.WaitGroup) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.isClosed() {
		return false
	}
	wg.Add(1)
	return true
}

// check refuses a request the Driver cannot take.
func (d *Driver) check(ctx context.Context, r backend.Request) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	if err := backend.CheckName(r.Name); err != nil {
		return err
	}
	if r.TTL <= 0 {
		return fmt.Errorf("%w: %v", backend.ErrInvalidTTL, r.TTL)
	}
	return ctx.Err()
}

// Acquire implements backend.Driver: one run of the acquire script, which
// takes a free lock unless older waiters are queued.
func (d *Driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if err := d.check(ctx, r); err != nil {
		return nil, err
	}
	t, err := d.try(ctx, r, false, "")
	if err != nil {
		return nil, err
	}
	if t.l == nil {
		return nil, t.held
	}
	d.startChain(r.Name, t.l, t.last, false)
	return d.hold(t.l), nil
}

// hold returns l, a hold that Redis granted, once its key is watched, if
// the Driver watches.
func (d *Driver) hold(l *lease) *lease {
	if d.watch != nil {
		l.lost = backend.NewLostSignal()
		d.watch.Watch(l.key, l)
	}
	return l
}

// try runs the acquire script once. It returns the lease when granted
// (already: the owner held it before this call, handed it while it
// waited), or what holds it: the holder's remaining lease (maxWait when
// unknown) and the fence counter at the call. With queue, a held lock puts
// the owner in its queue, or renews its place there, with inbox as the
// channel to tell it of a grant ("": none, the waiter polls); the caller
// leaves the queue when it gives up. Without, a call that failed but may
// have run is undone before try returns.
func (d *Driver) try(ctx context.Context, r backend.Request, queue bool, inbox string) (t tried, err error) {
	key := d.keys.Lock(r.Name)
	l := d.newLease(r, key)
	mode := "0"
	if queue {
		mode = "1"
	}
	args := []any{r.Owner, scripts.MS(r.TTL), mode, scripts.MS(placeWindow(r.TTL)), inbox}
	var res any
	cleaned := false
	if d.opts.WaitReplicas > 0 {
		res, cleaned, err = d.acquireReplicated(ctx, l, args)
	} else {
		res, err = d.acquires.Run(ctx, keys.Queued(key), args, func(res any, err error) {
			// The caller has gone: whatever the call did for the owner
			// (a grant, a place in the queue) is undone.
			if err == nil || mayHaveRun(err) {
				d.cleanupLater(l)
			}
		})
	}
	if err != nil {
		if !queue && !cleaned && mayHaveRun(err) {
			d.cleanup(ctx, l) // before returning: the caller then holds nothing
		}
		return tried{}, d.storeErr(err)
	}
	a, err := scripts.ParseAcquire(res)
	if err != nil {
		return tried{}, err
	}
	if a.Status == 0 {
		left := scripts.Left(a.PTTL, maxWait)
		return tried{left: left, fence: uint64(max(a.Fence, 0)), held: &backend.HeldError{Left: left, Owner: a.Owner, Token: uint64(max(a.HolderToken, 0))}}, nil
	}
	l.token = uint64(a.Token)
	if a.Status == 2 {
		// Handed to the owner by another call: its lease began TTL-pttl
		// before the script ran, and the script ran after l.start (the
		// send time), so this is never later than the real start.
		l.start = l.start.Add(-(r.TTL - time.Duration(max(a.PTTL, 0))*time.Millisecond))
	}
	return tried{l: l, already: a.Status == 2, last: uint64(max(a.Last, 0))}, nil
}

// tried is what one try found: a lease, or the holder and how long its
// lease has left, and the fence counter then.
type tried struct {
	l       *lease
	already bool
	last    uint64 // the last token reserved with the grant
	left    time.Duration
	fence   uint64
	held    *backend.HeldError
}

// cleanup releases by owner a grant that may have happened while the call
// that asked for it failed, and takes the owner out of the queue, with a
// ctx that is not the caller's.
func (d *Driver) cleanup(ctx context.Context, l *lease) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, _ = l.release(cctx, true)
}

// cleanupLater runs cleanup in the background, for a call whose caller
// has gone already (package coalesce): the pipelines go on meanwhile.
// Close waits for it, and its closing of the pipelines starts some.
func (d *Driver) cleanupLater(l *lease) {
	d.background.Add(1)
	go func() {
		defer d.background.Done()
		d.cleanup(context.Background(), l)
	}()
}

// mayHaveRun reports whether a failed acquire call may still have run on
// the server, and its caller must undo it: not one that the coalescer did
// not send, or whose reply it leaves to the abandoned function.
func mayHaveRun(err error) bool { return !coalesce.Gone(err) && scripts.MayHaveRun(err) }

// storeErr names the servers in an error of the client, marks errors of
// a closed client as backend.ErrClosed, and adds the last dial error to a
// ctx error that hid it (go-redis retries dials until the ctx ends).
func (d *Driver) storeErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, redis.ErrClosed) && !errors.Is(err, backend.ErrClosed) {
		return fmt.Errorf("%w: %s: %w", backend.ErrClosed, d.addr, err)
	}
	if derr := d.dials.Last(); derr != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return fmt.Errorf("%s: %w (last dial error: %w)", d.addr, err, derr)
	}
	return fmt.Errorf("%s: %w", d.addr, err)
}

// retryable reports whether a waiting Acquire should try again after err:
// network trouble and the replies Redis gives while it fails over, loads or
// reshards, but not a script, type or permission error, which would only
// repeat.
func retryable(err error) bool {
	if errors.Is(err, backend.ErrClosed) || errors.Is(err, ErrNotReplicated) || errors.Is(err, scripts.ErrReply) ||
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
