package zklock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"

	"github.com/golocker/locker/backend"
)

// Driver is a lock driver on ZooKeeper: the holders and waiters of a lock
// are ephemeral sequential nodes of the Driver's session. It implements
// backend.Driver, backend.Inspector and backend.QueueInspector, and is safe
// for concurrent use.
type Driver struct {
	conn       *zk.Conn
	own        bool // the Driver created conn and closes it
	prefix     string
	acl        []zk.ACL
	timeout    time.Duration // asked for (Open) or declared (New)
	negotiated *atomic.Int64 // ms granted by the server, when known (Open)

	ctx    context.Context // ends with Close: stops every goroutine and wait
	cancel context.CancelFunc
	wg     sync.WaitGroup // monitor, heartbeats, lease watchers, cleanups

	mu      sync.Mutex
	closed  bool
	gen     *generation      // the session as last confirmed
	orphans map[string]int64 // nodes to delete, by the session they belong to

	beating  atomic.Bool // a heartbeat is in flight
	cleaning atomic.Bool // deleteOrphans is running
	crashed  atomic.Bool // stop as a dead process would: delete nothing (tests)

	plainCreate atomic.Bool // create nodes without the write that dates them (see create)

	// For tests: events received on predecessors' nodes, waiters blocked
	// on such a watch, nodes found again by their GUID after a connection
	// loss, acquisitions whose token came with their create, and a hook
	// run after each acquisition's node is created.
	predEvents    atomic.Int64
	watching      atomic.Int64
	recovered     atomic.Int64
	createdTokens atomic.Int64
	afterCreate   func()
}

var (
	_ backend.Driver         = (*Driver)(nil)
	_ backend.Inspector      = (*Driver)(nil)
	_ backend.QueueInspector = (*Driver)(nil)
	_ backend.LostNotifier   = (*lease)(nil)
)

// New returns a Driver on a ZooKeeper connection the caller already has.
// WithSessionTimeout is required: the session timeout the connection was
// granted, from which the Driver decides when its holds may have expired
// (go-zookeeper does not expose it). Close does not close conn. Options:
// WithSessionTimeout, WithPrefix, WithACL.
func New(conn *zk.Conn, opts ...Option) (*Driver, error) {
	if conn == nil {
		return nil, fmt.Errorf("%w: nil connection", errOption)
	}
	o := defaultOptions()
	if err := o.apply(opts); err != nil {
		return nil, err
	}
	if len(o.openOnly) > 0 {
		return nil, fmt.Errorf("%w: %s applies to Open, not New", errOption, o.openOnly[0])
	}
	if !o.timeoutSet {
		return nil, fmt.Errorf("%w: New needs WithSessionTimeout, the session timeout of the connection", errOption)
	}
	if o.acl == nil {
		o.acl = zk.WorldACL(zk.PermAll)
	}
	return newDriver(conn, false, o, new(atomic.Int64)), nil
}

func newDriver(conn *zk.Conn, own bool, o options, negotiated *atomic.Int64) *Driver {
	d := &Driver{
		conn:       conn,
		own:        own,
		prefix:     o.prefix,
		acl:        o.acl,
		timeout:    o.sessionTimeout,
		negotiated: negotiated,
	}
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
func (d *Driver) call(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Nodes. Lock name n is the container node prefix/esc(n); its children
// are the protected ephemeral sequential nodes _c_<guid>-lock-<seq> of
// its holder (lowest sequence) and waiters. The GUID lets an acquisition
// find its node again after a connection loss.

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
		seq, err := strconv.ParseInt(c[i+len(lockInfix):], 10, 64)
		if err != nil {
			continue
		}
		nodes = append(nodes, lockNode{name: c, seq: seq})
	}
	slices.SortFunc(nodes, func(a, b lockNode) int {
		if a.seq != b.seq {
			return compare(a.seq, b.seq)
		}
		return strings.Compare(a.name, b.name)
	})
	return nodes
}

func compare(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), utf8.ValidString(b.String())
}

// errSessionEnded says an acquisition must start again: the session it
// used ended, or its node vanished, while it was in flight.
var errSessionEnded = errors.New("zklock: session ended")

// ctxErr returns ctx's error when ctx has ended (the call failed because of
// it), else err.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// retryable reports whether a request failed for a reason that passes: a
// connection being re-established, a session being replaced.
func retryable(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved)
}

// pause waits d, or less if ctx ends first; it reports whether ctx is still
// alive.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
