package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// Driver is a lock driver on etcd: one session (a lease kept alive by the
// Driver) whose keys are the Driver's holds and waiting places, and one
// watch stream for the watches of its holds and waiters. It
// implements backend.Driver, backend.Waiter, backend.Inspector,
// backend.QueueInspector and backend.LogSetter, and is safe for concurrent
// use.
type Driver struct {
	cli       *clientv3.Client
	own       bool // the Driver created cli and closes it
	prefix    string
	ttl       time.Duration                // the session TTL asked for
	endpoints string                       // for errors
	log       *atomic.Pointer[slog.Logger] // where the client's logs go (Open)

	ctx    context.Context // ends with Close: stops every goroutine and wait
	cancel context.CancelFunc
	wg     sync.WaitGroup // keepalive loops, the watch, background cleanups

	granting chan struct{} // holds a token while a session is being granted
	watching chan struct{} // closed once the watch over the prefix is set up
	mu       sync.Mutex
	sess     *session // the current session, nil before the first
	closed   bool

	crashed atomic.Bool // stop as a dead process would: no revoke, no delete (tests)

	// For tests: waiters woken by a deletion, and waiting for one; a
	// hook run when a Release has been allowed a plain Delete.
	wakeups, waiting atomic.Int64
	beforeDelete     func()

	keys keyWatch
}

var (
	_ backend.Driver         = (*Driver)(nil)
	_ backend.Waiter         = (*Driver)(nil)
	_ backend.Inspector      = (*Driver)(nil)
	_ backend.QueueInspector = (*Driver)(nil)
	_ backend.LogSetter      = (*Driver)(nil)
)

// New returns a Driver on an etcd client the caller already has. Close does
// not close cli, and the client's logs stay where its configuration sends
// them. Options: WithPrefix, WithSessionTTL.
func New(cli *clientv3.Client, opts ...Option) (*Driver, error) {
	if cli == nil {
		return nil, optionError("nil client")
	}
	o := defaultOptions()
	if err := driverkit.Apply(&o, opts); err != nil {
		return nil, err
	}
	if err := o.Refuse("etcdlock", "New: configure the client you pass", openOnly...); err != nil {
		return nil, err
	}
	return newDriver(cli, false, o, nil), nil
}

func newDriver(cli *clientv3.Client, own bool, o options, log *atomic.Pointer[slog.Logger]) *Driver {
	if log == nil {
		log = new(atomic.Pointer[slog.Logger])
	}
	d := &Driver{cli: cli, own: own, prefix: o.prefix, ttl: o.sessionTTL, endpoints: strings.Join(cli.Endpoints(), ","), log: log}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.keys.subs, d.keys.kick = make(map[int64]*sub), make(chan struct{}, 1)
	d.granting, d.watching = make(chan struct{}, 1), make(chan struct{})
	return d
}

// Capabilities implements backend.Driver.
func (d *Driver) Capabilities() backend.Capabilities {
	return driverkit.SessionCapabilities()
}

// Client returns the etcd client the Driver uses.
func (d *Driver) Client() *clientv3.Client { return d.cli }

// Close ends the Driver's waits in flight with ErrClosed, revokes its
// session (which frees any key still held — package locker releases every
// hold before), stops its goroutines, and closes the client if Open created
// it. A cluster that does not answer cannot hang Close: the revocation is
// bounded, and the session then expires after its TTL.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	s := d.sess
	d.mu.Unlock()
	if s != nil {
		s.end(backend.ErrClosed)
		d.revoke(s)
	}
	d.cancel()
	d.wg.Wait()
	if d.own && !d.crashed.Load() {
		return d.cli.Close()
	}
	return nil
}

// crash stops the Driver as a process that died would: its keepalives stop
// and nothing is revoked or deleted, so its keys stay until the session's
// lease expires on the server. For tests.
func (d *Driver) crash() {
	d.crashed.Store(true)
	d.cancel()
	if d.own {
		_ = d.cli.Close()
	}
}

// goBackground runs f on a goroutine that Close waits for, unless the
// Driver is closed; it reports whether f was started.
func (d *Driver) goBackground(f func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.background(f)
	}
	return !d.closed
}

// background runs f on a goroutine that Close waits for. d.mu is held.
func (d *Driver) background(f func()) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f()
	}()
}

// Keys. Lock name n owns the key range prefix/esc(n)/, where esc escapes
// '/' and '%', so that names that share a beginning never share a range (a
// range read over "x" never sees "x/y"). A session uses one key in a range,
// prefix/esc(n)/<lease> (with a suffix ~1, ~2… after a write to it failed:
// keyUses), whose value is the owner: package locker makes one acquisition
// of a name at a time per Client. The key with the
// lowest create revision holds the lock.

func (d *Driver) namePrefix(name string) string {
	return d.prefix + "/" + driverkit.Escape(name, "/") + "/"
}

func (d *Driver) key(name string, s *session) string {
	return d.namePrefix(name) + fmt.Sprintf("%016x", int64(s.id))
}

// nameOf returns the lock name of one of the Driver's keys.
func (d *Driver) nameOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, d.prefix+"/")
	if !ok {
		return "", false
	}
	esc, suffix, ok := strings.Cut(rest, "/")
	if !ok || suffix == "" {
		return "", false
	}
	name, err := url.PathUnescape(esc)
	return name, err == nil
}

// SetLogger implements backend.LogSetter: the etcd client that Open made
// logs there (a Driver from New leaves its client's logger alone).
func (d *Driver) SetLogger(l *slog.Logger) {
	if l != nil {
		d.log.Store(l)
	}
}

var (
	// errSessionEnded says an acquisition must start again in a new
	// session: the one it used ended, or its key vanished, while it was
	// in flight.
	errSessionEnded = errors.New("etcdlock: session ended")
	// errBusy says the session's key of the name is another
	// acquisition's of the Driver, or a released hold's whose deletion
	// failed and is being retried.
	errBusy = errors.New("etcdlock: the session's key of the name is in use")
)

// storeErr is the error of a call that failed with the cluster's err: it
// names the endpoints, and matches ctx's error when ctx ended.
func (d *Driver) storeErr(ctx context.Context, err error) error {
	return driverkit.StoreErr(ctx, "etcdlock", d.endpoints, err)
}
