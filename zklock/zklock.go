package zklock

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// Driver is a lock driver on ZooKeeper: the holders and waiters of a lock
// are ephemeral sequential nodes of the Driver's session. It implements
// backend.Driver, backend.Waiter, backend.Inspector,
// backend.QueueInspector and backend.LogSetter, and is safe for concurrent
// use.
type Driver struct {
	conn    *zk.Conn
	own     bool // the Driver created conn and closes it
	prefix  string
	acl     []zk.ACL
	timeout time.Duration // asked for (Open) or declared (New)
	servers string        // for errors
	log     *clientLog    // go-zookeeper's logger (Open), nil for New

	ctx    context.Context // ends with Close: stops every goroutine and wait
	cancel context.CancelFunc
	wg     sync.WaitGroup // monitor, heartbeats, lease watchers, cleanups

	mu     sync.Mutex
	closed bool
	gen    *generation // the session as last confirmed

	beating     atomic.Bool // a heartbeat is in flight
	crashed     atomic.Bool // stop as a dead process would: delete nothing (tests)
	paused      atomic.Bool // the monitor does nothing, as in a paused process (tests)
	plainCreate atomic.Bool // create nodes without the write that dates them (see create)

	// For tests: waiters woken by their predecessor's deletion, waiters
	// waiting for one, nodes found again by their GUID after a connection
	// loss, acquisitions whose token came with their create, and a hook
	// run after each acquisition's node is created.
	wakeups, waiting, recovered, createdTokens atomic.Int64
	afterCreate                                func()
}

var (
	_ backend.Driver         = (*Driver)(nil)
	_ backend.Waiter         = (*Driver)(nil)
	_ backend.Inspector      = (*Driver)(nil)
	_ backend.QueueInspector = (*Driver)(nil)
	_ backend.LogSetter      = (*Driver)(nil)
	_ backend.Passer         = (*lease)(nil)
)

// New returns a Driver on a ZooKeeper connection the caller already has.
// WithSessionTimeout is required: the session timeout the connection was
// granted, from which the Driver decides when its holds may have expired
// (go-zookeeper does not expose it). Close does not close conn, and its
// logs stay where its options send them. Options: WithSessionTimeout,
// WithPrefix, WithACL.
func New(conn *zk.Conn, opts ...Option) (*Driver, error) {
	if conn == nil {
		return nil, optionError("nil connection")
	}
	o := defaultOptions()
	if err := driverkit.Apply(&o, opts); err != nil {
		return nil, err
	}
	if err := o.Refuse("zklock", "New", openOnly...); err != nil {
		return nil, err
	}
	if !o.timeoutSet {
		return nil, optionError("New needs WithSessionTimeout, the session timeout of the connection")
	}
	if o.acl == nil {
		o.acl = zk.WorldACL(zk.PermAll)
	}
	return newDriver(conn, false, o, nil, ""), nil
}

func newDriver(conn *zk.Conn, own bool, o options, log *clientLog, servers string) *Driver {
	d := &Driver{conn: conn, own: own, prefix: o.prefix, acl: o.acl, timeout: o.sessionTimeout, log: log, servers: servers}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.monitor()
	}()
	return d
}

// Capabilities implements backend.Driver.
func (d *Driver) Capabilities() backend.Capabilities {
	return driverkit.SessionCapabilities()
}

// Conn returns the ZooKeeper connection the Driver uses.
func (d *Driver) Conn() *zk.Conn { return d.conn }

// Close ends the Driver's waits in flight with ErrClosed, stops its
// goroutines, and closes the connection if Open created it — which ends
// the session, so the server deletes any node the Driver still had (package
// locker releases every hold before).
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	g := d.gen
	d.mu.Unlock()
	d.cancel()
	if g != nil {
		g.end(backend.ErrClosed)
	}
	d.wg.Wait()
	if d.own {
		d.conn.Close()
	}
	return nil
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

// call runs f, one request of the ZooKeeper client, and returns when it
// returns or ctx ends. go-zookeeper's requests take no context and can
// block until the connection fails (up to 2/3 of the session timeout, more
// while it connects); an abandoned request finishes on its own goroutine.
// What f writes may be read only when call returned nil.
func (d *Driver) call(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return driverkit.WithinErr(ctx, f)
}

// SetLogger implements backend.LogSetter: the connection that Open made
// logs there (a Driver from New leaves its connection's logger alone).
func (d *Driver) SetLogger(l *slog.Logger) {
	if d.log != nil && l != nil {
		d.log.log.Store(l)
	}
}

// clientLog receives go-zookeeper's log lines. It sends them to the
// logger of SetLogger (nowhere before), and records the session timeout
// the server granted, which go-zookeeper does not expose otherwise.
type clientLog struct {
	negotiated atomic.Int64 // ms
	log        atomic.Pointer[slog.Logger]
}

func (l *clientLog) Printf(format string, args ...any) {
	if format == "authenticated: id=%d, timeout=%d" && len(args) == 2 {
		if ms, ok := args[1].(int32); ok && ms > 0 {
			l.negotiated.Store(int64(ms))
		}
	}
	if lg := l.log.Load(); lg != nil {
		lg.Info(fmt.Sprintf(format, args...), "logger", "go-zookeeper")
	}
}

// Nodes. Lock name n is the container node prefix/esc(n); its children
// are the protected ephemeral sequential nodes _c_<guid>-lock-<seq> of
// its holder (lowest sequence) and waiters. The GUID lets an acquisition
// find its node again after a connection loss. Names are escaped into one
// node each, so that "x" and "x/y" are siblings, not parent and child.

const (
	protectedPrefix = "_c_"
	lockInfix       = "-lock-"
)

func (d *Driver) dir(name string) string { return d.prefix + "/" + escape(name) }

func nodePrefix(guid string) string { return protectedPrefix + guid + lockInfix }

func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// lockNode is a child of a lock's node.
type lockNode struct {
	name string
	seq  int64
}

// lockNodes returns the lock nodes among children, in sequence order;
// other children are ignored.
func lockNodes(children []string) []lockNode {
	nodes := make([]lockNode, 0, len(children))
	for _, c := range children {
		i := strings.LastIndex(c, lockInfix)
		if i < 0 || !strings.HasPrefix(c, protectedPrefix) {
			continue
		}
		if seq, err := strconv.ParseInt(c[i+len(lockInfix):], 10, 64); err == nil {
			nodes = append(nodes, lockNode{name: c, seq: seq})
		}
	}
	slices.SortFunc(nodes, func(a, b lockNode) int { return cmp.Or(cmp.Compare(a.seq, b.seq), strings.Compare(a.name, b.name)) })
	return nodes
}

// forbidden reports whether ZooKeeper refuses r in a node name. The server
// checks UTF-16 code units, so a rune beyond the BMP is refused too (its
// surrogates are).
func forbidden(r rune) bool {
	return r <= 0x1f || (r >= 0x7f && r <= 0x9f) || (r >= 0xd800 && r <= 0xf8ff) || r >= 0xfff0
}

// escape turns a lock name into a node name: '%', '/' and the characters
// ZooKeeper refuses become %XX (each byte of their UTF-8), and "." and ".."
// become %2E and %2E%2E.
func escape(name string) string {
	switch name {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	var b strings.Builder
	for _, r := range name {
		if r != '%' && r != '/' && !forbidden(r) {
			b.WriteRune(r)
			continue
		}
		var buf [utf8.UTFMax]byte
		for _, c := range buf[:utf8.EncodeRune(buf[:], r)] {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// unescape reverses escape; ok is false for a node name escape cannot have
// produced.
func unescape(s string) (string, bool) {
	name, err := url.PathUnescape(s)
	return name, err == nil && utf8.ValidString(name)
}

// errSessionEnded says an acquisition must start again: the session it
// used ended, or its node vanished, while it was in flight.
var errSessionEnded = errors.New("zklock: session ended")

// storeErr is the error of a call that failed with ZooKeeper's err: it
// names the servers, and matches ctx's error when ctx ended.
func (d *Driver) storeErr(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, backend.ErrClosed) {
		return err
	}
	servers := d.servers
	if servers == "" {
		servers = d.conn.Server()
	}
	return driverkit.StoreErr(ctx, "zklock", servers, err)
}

// retryable reports whether a request failed for a reason that passes: a
// connection being re-established, a session being replaced.
func retryable(err error) bool {
	for _, e := range []error{zk.ErrConnectionClosed, zk.ErrSessionExpired, zk.ErrSessionMoved, zk.ErrNoServer} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
