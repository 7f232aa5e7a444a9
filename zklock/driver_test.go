package zklock_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver/zkserver"
	"github.com/golocker/locker/zklock"
)

// Driver-level tests of what the conformance suite does not reach: the
// traps of ZooKeeper's lock recipe (connection loss during create, the herd
// effect), waits while the ensemble is out of reach, names ZooKeeper
// refuses, authentication and the fencing token's source.

// TestCreateWhoseReplyIsLost loses the reply to the create of a lock node
// (the connection drops after the server applied it): the acquisition must
// find its node again by its GUID instead of creating a second one, which
// would stay behind and block the lock for as long as the session lives.
func TestCreateWhoseReplyIsLost(t *testing.T) {
	z := standalone.Get(t)
	ctx := drivertest.Context(t, time.Minute)
	var armed atomic.Bool
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &replyLoser{Conn: c, armed: &armed}, nil
	}
	d := openDriver(t, urlOf(z, "/lost-reply", "session_timeout=4s"), zklock.WithDialer(dial))
	const name = "lost-reply"
	// The lock's node exists, so that the create armed below is the lock
	// node's.
	drivertest.Acquire(t, ctx, d, name, "first", false).Release(ctx)

	armed.Store(true)
	l := drivertest.Acquire(t, ctx, d, name, "owner", false)
	if armed.Load() {
		t.Fatal("no create request was sent")
	}
	if n := zklock.Recovered(d); n != 1 {
		t.Errorf("nodes found again by GUID = %d, want 1", n)
	}
	nodes, err := lockChildren(adminConn(t, z), zklock.Dir(d, name))
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes of the lock = %v, %v; want exactly one", nodes, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := d.Waiters(ctx, name); err != nil || n != 0 {
		t.Errorf("Waiters after Release = %d, %v", n, err)
	}
	if hs, err := d.Holds(ctx, name); err != nil || len(hs) != 0 {
		t.Errorf("Holds after Release = %v, %v; want none", hs, err)
	}
}

// replyLoser is a client connection that, once armed, lets the next create
// request reach the server, then swallows the server's reply to it and
// cuts the connection — a network failure between request and reply.
type replyLoser struct {
	net.Conn
	armed *atomic.Bool

	mu       sync.Mutex
	xid      int32 // of the create whose reply to swallow; 0: none
	pending  []byte
	cut      bool
	watching bool
}

// Opcodes of the requests that create a lock node: a multi (the create
// with the write that dates it) or, where that write is refused, a create.
const (
	opCreate = 1
	opMulti  = 14
)

func isCreate(b []byte) bool {
	op := int32(binary.BigEndian.Uint32(b[8:12]))
	return op == opCreate || op == opMulti
}

func (c *replyLoser) Write(b []byte) (int, error) {
	// A request is [length][xid][opcode]..., one packet per Write.
	if len(b) >= 12 && isCreate(b) && c.armed.CompareAndSwap(true, false) {
		c.mu.Lock()
		c.xid, c.watching = int32(binary.BigEndian.Uint32(b[4:8])), true
		c.mu.Unlock()
	}
	return c.Conn.Write(b)
}

func (c *replyLoser) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		c.mu.Lock()
		watching, xid, cut := c.watching, c.xid, c.cut
		c.mu.Unlock()
		switch {
		case cut:
			return 0, io.EOF
		case !watching:
			return c.Conn.Read(p)
		}
		// Read whole packets until the reply: [length][xid]...
		var hdr [4]byte
		if _, err := io.ReadFull(c.Conn, hdr[:]); err != nil {
			return 0, err
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(c.Conn, body); err != nil {
			return 0, err
		}
		if len(body) >= 4 && int32(binary.BigEndian.Uint32(body[:4])) == xid {
			c.mu.Lock()
			c.cut, c.watching = true, false
			c.mu.Unlock()
			_ = c.Conn.Close()
			continue
		}
		c.pending = append(hdr[:], body...)
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

func TestNamesZooKeeperRefuses(t *testing.T) {
	ctx := drivertest.Context(t, time.Minute)
	d := openDriver(t, urlOf(standalone.Get(t), "/names", ""))
	names := []string{".", "..", "a/b", "a/../b", "/lead", "trail/", "zookeeper", "emoji-🔒", "ctl-\x01\x7f", "priv-\ue000", "%2F", "x\u0085y"}
	var ls []backend.Lease
	for i, n := range names {
		ls = append(ls, drivertest.Acquire(t, ctx, d, n, fmt.Sprint("owner-", i), false))
	}
	hs, err := d.Holds(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, h := range hs {
		got[h.Name] = h.Owner
	}
	for i, n := range names {
		if got[n] != fmt.Sprint("owner-", i) {
			t.Errorf("Holds has %q held by %q, want owner-%d", n, got[n], i)
		}
		if _, err := d.Acquire(ctx, backend.Request{Name: n, Owner: "other", TTL: time.Minute}); !errors.Is(err, backend.ErrHeld) {
			t.Errorf("a second Acquire of %q = %v, want ErrHeld", n, err)
		}
	}
	for _, l := range ls {
		if err := l.Release(ctx); err != nil {
			t.Error(err)
		}
	}
	if err := d.ForceRelease(ctx, "nobody"); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("ForceRelease of a free name = %v, want ErrNotHeld", err)
	}
}

// TestUsersConnection builds a Driver on a connection the caller owns:
// Close leaves it open.
func TestUsersConnection(t *testing.T) {
	z := standalone.Get(t)
	ctx := drivertest.Context(t, time.Minute)
	conn := adminConn(t, z)
	if _, err := zklock.New(conn); err == nil || !strings.Contains(err.Error(), "WithSessionTimeout") {
		t.Errorf("New without the session timeout = %v, want an error naming WithSessionTimeout", err)
	}
	if _, err := zklock.New(conn, zklock.WithSessionTimeout(4*time.Second), zklock.WithConnectTimeout(time.Second)); err == nil {
		t.Error("New accepted an Open-only option")
	}
	d, err := zklock.New(conn, zklock.WithSessionTimeout(4*time.Second), zklock.WithPrefix("/users-conn"))
	if err != nil {
		t.Fatal(err)
	}
	l := drivertest.Acquire(t, ctx, d, "mine", "owner", false)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Acquire(ctx, backend.Request{Name: "mine", Owner: "o", TTL: time.Minute}); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
	if _, _, err := conn.Exists("/users-conn"); err != nil {
		t.Errorf("the caller's connection after the Driver's Close: %v", err)
	}
}

// TestReleaseAfterAPauseLongerThanTheSession: an owner whose process did
// not run for longer than the session timeout (SIGSTOP, a long GC) while
// cut off from ZooKeeper, and that releases before its monitor ran again,
// is told its hold is lost — not that the release failed for a reason
// unknown: by then the server expired its session and another owner holds
// the lock.
func TestReleaseAfterAPauseLongerThanTheSession(t *testing.T) {
	z := standalone.Get(t)
	ctx := drivertest.Context(t, time.Minute)
	url := urlOf(z, "/paused", "session_timeout=4s")
	var link partition
	d := openDriver(t, url, zklock.WithDialer(link.dial))
	const name = "paused"
	l := drivertest.Acquire(t, ctx, d, name, "paused", false)
	zklock.PauseMonitor(d)
	link.cut()

	// The server expires the session, and the next owner is granted the
	// lock.
	next := drivertest.Acquire(t, ctx, openDriver(t, url), name, "next", true)
	defer next.Release(ctx)
	if next.Token() <= l.Token() {
		t.Errorf("the next owner's token %d is not above the paused owner's %d", next.Token(), l.Token())
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := l.Release(rctx); !errors.Is(err, backend.ErrLost) {
		t.Fatalf("Release after the pause = %v, want ErrLost", err)
	}
}

// partition dials ZooKeeper until cut, which closes every connection it
// made and fails every dial after.
type partition struct {
	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func (p *partition) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return nil, errors.New("cut off")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		p.conns = append(p.conns, c)
	}
	return c, err
}

func (p *partition) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// TestGivingUpWhileTheServerIsDown: a waiter that gives up while
// ZooKeeper does not answer returns at once, and its node goes once the
// server is back — deleted by the heartbeat, or with the session.
func TestGivingUpWhileTheServerIsDown(t *testing.T) {
	z := standalone.Get(t)
	if len(z.Nodes) == 0 {
		t.Skip("needs a ZooKeeper started by testserver, to stop it")
	}
	drivertest.GiveUpWhileTheServerIsDown(t, queue(z, "/down"), z.Nodes[0])
}

// TestOneReleaseWakesOneWaiter: each waiter watches only the node just
// below its own, so a release wakes one waiter however many wait.
func TestOneReleaseWakesOneWaiter(t *testing.T) {
	n := 100
	if testing.Short() {
		n = 20
	}
	drivertest.OneReleaseWakesOneWaiter(t, queue(standalone.Get(t), "/herd"), n)
}

// queue returns the queue checks' hooks for Drivers of z under prefix.
func queue(z *zkserver.ZooKeeperServer, prefix string) drivertest.Queue[*zklock.Driver] {
	url := urlOf(z, prefix, "session_timeout=4s")
	return drivertest.Queue[*zklock.Driver]{
		Open:    func(t *testing.T) *zklock.Driver { return openDriver(t, url) },
		Waiting: zklock.Waiting,
		Wakeups: zklock.Wakeups,
	}
}

// TestDigestAuthentication opens Drivers with digest credentials: their
// nodes are the creator's only, so a Driver with the same credentials sees
// the lock held, and a client without them cannot touch it.
func TestDigestAuthentication(t *testing.T) {
	z := standalone.Get(t)
	ctx := drivertest.Context(t, time.Minute)
	url := strings.Replace(urlOf(z, "/digest", "session_timeout=4s"), "zk://", "zk://app:S3cr3t-Pw@", 1)
	a, b := openDriver(t, url), openDriver(t, url)
	l := drivertest.Acquire(t, ctx, a, "guarded", "owner", false)
	defer l.Release(ctx)
	if _, err := b.Acquire(ctx, backend.Request{Name: "guarded", Owner: "b", TTL: time.Minute}); !errors.Is(err, backend.ErrHeld) {
		t.Errorf("Acquire with the same credentials = %v, want ErrHeld", err)
	}
	anon := openDriver(t, urlOf(z, "/digest", "session_timeout=4s"))
	_, err := anon.Acquire(ctx, backend.Request{Name: "guarded", Owner: "c", TTL: time.Minute})
	if err == nil || errors.Is(err, backend.ErrHeld) {
		t.Errorf("Acquire without credentials = %v, want an error (not authenticated)", err)
	} else if strings.Contains(err.Error(), "S3cr3t-Pw") {
		t.Errorf("error %v shows the password", err)
	}
	t.Logf("without credentials: %v", err)
}

// TestTokenIsTheNodesCzxid checks the token against the holder node's
// czxid, read by another client, for a free lock and for a waiter granted
// on a release, over 20 rounds.
func TestTokenIsTheNodesCzxid(t *testing.T) {
	z := standalone.Get(t)
	ctx := drivertest.Context(t, time.Minute)
	url := urlOf(z, "/czxid", "")
	da, db := openDriver(t, url), openDriver(t, url)
	admin := adminConn(t, z)
	const name = "czxid"
	check := func(what string, l backend.Lease) {
		t.Helper()
		st, _ := holderStat(t, admin, zklock.Dir(da, name))
		if l.Token() != uint64(st.Czxid) {
			t.Errorf("%s: token %d, the holder node's czxid %d", what, l.Token(), st.Czxid)
		}
	}
	for round := range 20 {
		// Free lock: the fast path.
		a := drivertest.Acquire(t, ctx, da, name, fmt.Sprintf("a%d", round), false)
		check(fmt.Sprintf("round %d, free lock", round), a)
		// A waiter, granted on a's release.
		got := make(chan backend.Lease, 1)
		go func() {
			l, err := db.AcquireWait(ctx, backend.Request{Name: name, Owner: fmt.Sprintf("b%d", round), TTL: time.Minute})
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		drivertest.Eventually(t, 10*time.Second, "the waiter's node", func() bool {
			nodes, _ := lockChildren(admin, zklock.Dir(da, name))
			return len(nodes) == 2
		})
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		b := <-got
		if b == nil {
			t.FailNow()
		}
		check(fmt.Sprintf("round %d, waiter", round), b)
		if b.Token() <= a.Token() {
			t.Errorf("round %d: token %d after %d", round, b.Token(), a.Token())
		}
		if err := b.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Every token came with the create, none from a read of the node.
	if na, nb := zklock.CreatedTokens(da), zklock.CreatedTokens(db); na != 20 || nb != 20 {
		t.Errorf("tokens that came with the create: %d and %d of 20", na, nb)
	}
}

// TestTokenWhenTheLockNodeChangesAfterTheCreate changes the lock node's
// children between an acquisition's create and its listing of them — a
// child made and deleted, as a TryLock that lost would — so that the last
// change of the lock node is not the acquisition's: the token must still
// be the holder node's czxid.
func TestTokenWhenTheLockNodeChangesAfterTheCreate(t *testing.T) {
	const name = "changed"
	ctx, d, admin, dir := lockNode(t, "/czxid-changed", name)
	zklock.SetAfterCreate(d, func() {
		p, err := admin.Create(dir+"/other", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		if err == nil {
			err = admin.Delete(p, -1)
		}
		if err != nil {
			t.Errorf("changing the lock node's children: %v", err)
		}
	})
	for round := range 5 {
		l := drivertest.Acquire(t, ctx, d, name, fmt.Sprintf("o%d", round), false)
		st, n := holderStat(t, admin, dir)
		if n != 1 {
			t.Fatalf("round %d: %d lock nodes, want 1", round, n)
		}
		_, dirSt, err := admin.Get(dir)
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() != uint64(st.Czxid) {
			t.Errorf("round %d: token %d, the holder node's czxid %d (the lock node's pzxid %d)", round, l.Token(), st.Czxid, dirSt.Pzxid)
		}
		if dirSt.Pzxid == st.Czxid {
			t.Fatalf("round %d: the hook did not change the lock node's children", round)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := zklock.CreatedTokens(d); n != 5 {
		t.Errorf("%d of 5 tokens came with the create", n)
	}
}

// TestLockNodeThatMayNotBeWritten has the lock's node made beforehand,
// by someone else, with an ACL that lets the Driver create and delete
// children but not write the node: the create that dates itself with a
// write is refused, and the Driver falls back to creating the node alone
// and reading its czxid.
func TestLockNodeThatMayNotBeWritten(t *testing.T) {
	const name = "no-write"
	ctx, d, admin, dir := lockNode(t, "/no-write", name)
	if _, err := admin.Create(dir[:strings.LastIndexByte(dir, '/')], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	if _, err := admin.Create(dir, nil, 0, zk.WorldACL(zk.PermRead|zk.PermCreate|zk.PermDelete)); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		l := drivertest.Acquire(t, ctx, d, name, fmt.Sprintf("o%d", round), false)
		st, n := holderStat(t, admin, dir)
		if n != 1 {
			t.Fatalf("round %d: %d lock nodes, want 1", round, n)
		}
		if l.Token() != uint64(st.Czxid) {
			t.Errorf("round %d: token %d, the holder node's czxid %d", round, l.Token(), st.Czxid)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := zklock.CreatedTokens(d); n != 0 {
		t.Errorf("%d tokens came with a create that may not write the lock's node", n)
	}
}

// lockNode opens a Driver under root on the standalone server and an
// admin connection to it, and returns them with the path of name's lock
// node.
func lockNode(t *testing.T, root, name string) (context.Context, *zklock.Driver, *zk.Conn, string) {
	t.Helper()
	z := standalone.Get(t)
	ctx := drivertest.Context(t, time.Minute)
	d := openDriver(t, urlOf(z, root, ""))
	return ctx, d, adminConn(t, z), zklock.Dir(d, name)
}

// holderStat returns the stat of the lowest lock node in dir, the
// holder's, and how many lock nodes dir has.
func holderStat(t *testing.T, admin *zk.Conn, dir string) (*zk.Stat, int) {
	t.Helper()
	nodes, err := lockChildren(admin, dir)
	if err != nil || len(nodes) == 0 {
		t.Fatalf("lock nodes of %s = %v, %v", dir, nodes, err)
	}
	_, st, err := admin.Get(dir + "/" + nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	return st, len(nodes)
}
