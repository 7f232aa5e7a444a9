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
// UniversalClient. It implements backend.Driver, backend.Waiter,
// backend.Inspector, backend.QueueInspector and backend.BatchRenewer; its
// leases implement backend.Passer. It is safe for concurrent use.
type Driver struct {
	client    redis.UniversalClient
	ownClient bool   // opened from a URL: Close closes the client
	addr      string // what errors name: the server(s) tried
	opts      options
	keys      keys
	dials     *dialLog // the last dial error of a client the Driver opened
	acquires  *coalescer

	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error

	waiting    sync.WaitGroup // waits in the queue, and their leaving calls
	background sync.WaitGroup // reserve.lua calls, clean-ups of failed calls
	inboxName  string         // the channel of grants to this Driver's waiters
	watch      *watcher       // the keys of the holds (keyspace.go); nil without keyspace events

	mu      sync.Mutex
	waiters map[string]*waiter   // by owner
	chains  map[string]*chain    // by name: the Driver's holds that it may pass on (chain.go)
	early   map[string]time.Time // by name: when a "q" came before its chain began
	inbox   *inbox               // subscribed when a waiter first needs it
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
	o := defaultOptions()
	if err := driverkit.Apply(&o, opts); err != nil {
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
	d := newDriver(client, o, false)
	if o.keyspaceEvents != nil && *o.keyspaceEvents {
		d.watch = newWatcher(d)
	}
	return d, nil
}

// newDriver returns a Driver that does not watch its keys: the caller
// sets d.watch when the servers publish keyspace events.
func newDriver(client redis.UniversalClient, o options, own bool) *Driver {
	installLog()
	return &Driver{
		client:    client,
		ownClient: own,
		addr:      addrOf(client),
		opts:      o,
		keys:      keys{prefix: o.keyPrefix},
		acquires:  newCoalescer(client, o.directCalls),
		closed:    make(chan struct{}),
		inboxName: inboxChannel(o.keyPrefix),
		waiters:   make(map[string]*waiter),
		chains:    make(map[string]*chain),
		early:     make(map[string]time.Time),
	}
}

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
		FIFO:         d.opts.batch == 0,
		LostSignal:   d.watch != nil,
		Expiry:       true,
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
		forgetLogger(d)
		d.mu.Lock()
		close(d.closed) // under d.mu: no join after this sees the Driver open
		b := d.inbox
		d.mu.Unlock()
		d.acquires.close() // its callers' clean-ups join background
		d.waiting.Wait()
		d.background.Wait()
		if b != nil {
			b.stop()
		}
		if d.watch != nil {
			d.watch.close()
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
		d.watch.watch(l)
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
		res, err = d.acquires.run(ctx, scriptKeys(key), args, func(res any, err error) {
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
	a, err := parseAcquire(res)
	if err != nil {
		return tried{}, err
	}
	if a.status == 0 {
		left := pttl(a.n)
		return tried{left: left, fence: uint64(max(a.m, 0)), held: &backend.HeldError{Left: left, Owner: a.owner, Token: uint64(max(a.token, 0))}}, nil
	}
	l.token = uint64(a.n)
	if a.status == 2 {
		// Handed to the owner by another call: its lease began TTL-pttl
		// before the script ran, and the script ran after l.start (the
		// send time), so this is never later than the real start.
		l.start = l.start.Add(-(r.TTL - time.Duration(max(a.pttl, 0))*time.Millisecond))
	}
	return tried{l: l, already: a.status == 2, last: uint64(max(a.m, 0))}, nil
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
// has gone already (coalesce.go): the pipelines go on meanwhile. Close
// waits for it.
func (d *Driver) cleanupLater(l *lease) {
	d.background.Add(1)
	go func() {
		defer d.background.Done()
		d.cleanup(context.Background(), l)
	}()
}

// acquireReply is an acquire script's reply: {1, token, last} granted by
// this call (last: the last token reserved for the caller's Driver), {2,
// token, last, pttl} held already by the caller, {0, pttl, fence, owner,
// token} held by another owner.
type acquireReply struct {
	status, n, m int64
	pttl         int64
	owner        string
	token        int64
}

func parseAcquire(res any) (acquireReply, error) {
	a, _ := res.([]any)
	var r acquireReply
	ok := len(a) >= 2
	ints := func(dst ...*int64) {
		for i, d := range dst {
			if i >= len(a) {
				ok = false
				return
			}
			v, isInt := a[i].(int64)
			ok = ok && isInt
			*d = v
		}
	}
	if ok {
		ints(&r.status)
	}
	switch {
	case !ok:
	case r.status == 0 && len(a) == 5:
		ints(&r.status, &r.n, &r.m)
		var isStr bool
		r.owner, isStr = a[3].(string)
		var isInt bool
		r.token, isInt = a[4].(int64)
		ok = ok && isStr && isInt
	case r.status == 0 && len(a) == 2: // RedLock's acquire.lua: {0, pttl}
		ints(&r.status, &r.n)
	case r.status == 1 && (len(a) == 2 || len(a) == 3):
		ints(&r.status, &r.n)
		if len(a) == 3 {
			ints(&r.status, &r.n, &r.m)
		}
	case r.status == 2 && len(a) == 4:
		ints(&r.status, &r.n, &r.m, &r.pttl)
	default:
		ok = false
	}
	if !ok {
		return acquireReply{}, fmt.Errorf("%w from the acquire script: %v", errReply, res)
	}
	return r, nil
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
	var gone goneError
	if errors.As(err, &re) || errors.Is(err, redis.ErrClosed) || errors.As(err, &gone) {
		return false
	}
	// A call that never got a connection was never sent: no clean-up,
	// which would only wait for the same unreachable server.
	var oe *net.OpError
	return !errors.As(err, &oe) || oe.Op != "dial"
}

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
	if derr := d.dials.last(); derr != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return fmt.Errorf("%s: %w (last dial error: %w)", d.addr, err, derr)
	}
	return fmt.Errorf("%s: %w", d.addr, err)
}

// closedErr marks errors of a closed client as backend.ErrClosed.
func closedErr(err error) error {
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
