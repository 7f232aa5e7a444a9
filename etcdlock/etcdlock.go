package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/golocker/locker/backend"
)

// Driver is a lock driver on etcd: one session (a lease kept alive by the
// Driver) whose keys are the Driver's holds and waiting places. It
// implements backend.Driver, backend.Inspector and backend.QueueInspector,
// and is safe for concurrent use.
type Driver struct {
	cli    *clientv3.Client
	own    bool // the Driver created cli and closes it
	prefix string
	ttl    time.Duration // the session TTL asked for

	ctx    context.Context // ends with Close: stops every goroutine and wait
	cancel context.CancelFunc
	wg     sync.WaitGroup // keepalive loops, lease watchers, background cleanups

	mu       sync.Mutex
	sess     *session      // the current session, nil before the first
	creating chan struct{} // closed when a session being granted is ready
	closed   bool

	crashed atomic.Bool // stop as a dead process would: no revoke, no delete (tests)

	// For tests: events received on predecessors' keys, and waiters
	// currently blocked on such a watch.
	predEvents atomic.Int64
	watching   atomic.Int64
}

var (
	_ backend.Driver         = (*Driver)(nil)
	_ backend.Inspector      = (*Driver)(nil)
	_ backend.QueueInspector = (*Driver)(nil)
	_ backend.LostNotifier   = (*lease)(nil)
)

// New returns a Driver on an etcd client the caller already has. Close does
// not close cli. Options: WithPrefix, WithSessionTTL.
func New(cli *clientv3.Client, opts ...Option) (*Driver, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: nil client", errOption)
	}
	o := defaultOptions()
	if err := o.apply(opts); err != nil {
		return nil, err
	}
	if len(o.openOnly) > 0 {
		return nil, fmt.Errorf("%w: %s applies to Open, not New: configure the client you pass", errOption, o.openOnly[0])
	}
	return newDriver(cli, false, o), nil
}

func newDriver(cli *clientv3.Client, own bool, o options) *Driver {
	d := &Driver{cli: cli, own: own, prefix: o.prefix, ttl: o.sessionTTL}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	return d
}

// Capabilities implements backend.Driver.
func (d *Driver) Capabilities() backend.Capabilities {
	return backend.Capabilities{
		Fencing:      true,
		Notify:       true,
		FIFO:         true,
		LostSignal:   true,
		Expiry:       true,
		SessionLease: true,
		Inspect:      true,
		CrossProcess: true,
	}
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
	d.cancel()
	if s != nil {
		s.end(backend.ErrClosed)
		d.revoke(s)
	}
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
	if d.closed {
		return false
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f()
	}()
	return true
}

// Keys. Lock name n owns the keys prefix/esc(n)/<lease>-<slot>, where esc
// escapes '/' (so that names that share a beginning never share a range)
// and '%'. Each key is a holder or a waiter; the one with the lowest create
// revision holds the lock.

func (d *Driver) namePrefix(name string) string { return d.prefix + "/" + escape(name) + "/" }

// abortKey is the key that fences off the acquisition of key by owner
// whose outcome is unknown. It lives outside every name's range, and names
// the owner: a later acquisition of the same key is not fenced off.
func (d *Driver) abortKey(name, key, owner string) string {
	return d.prefix + "!aborted/" + escape(name) + "/" + key[strings.LastIndexByte(key, '/')+1:] + "/" + escape(owner)
}

// keySuffix is the last part of the key of slot in session lease (see
// session.takeSlot).
func keySuffix(lease clientv3.LeaseID, slot int) string {
	return fmt.Sprintf("%016x-%d", int64(lease), slot)
}

// escape replaces '%' and '/' by %25 and %2F. It maps prefixes to
// prefixes, so a range over prefix/esc(p) finds exactly the names that
// begin with p.
func escape(s string) string {
	if !strings.ContainsAny(s, "%/") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%':
			b.WriteString("%25")
		case '/':
			b.WriteString("%2F")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// unescape reverses escape; ok is false for a string escape cannot have
// produced (a key that is not ours).
func unescape(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "%25"):
			b.WriteByte('%')
		case strings.HasPrefix(s[i:], "%2F"):
			b.WriteByte('/')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// errSessionEnded says an acquisition must start again in a new session:
// the one it used ended, or its key vanished, while it was in flight.
var errSessionEnded = errors.New("etcdlock: session ended")

// ctxErr returns ctx's error when ctx has ended (the call failed because of
// it), else err.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
