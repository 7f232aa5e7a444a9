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

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/zklock"
)

// Driver-level tests of what the conformance suite does not reach: the
// traps of ZooKeeper's lock recipe (connection loss during create, session
// expiry, the herd effect), waits while the ensemble is out of reach, and
// names ZooKeeper refuses.

// TestCreateWhoseReplyIsLost loses the reply to the create of a lock node
// (the connection drops after the server applied it): the acquisition must
// find its node again by its GUID instead of creating a second one, which
// would stay behind and block the lock for as long as the session lives.
func TestCreateWhoseReplyIsLost(t *testing.T) {
	z := standalone.Get(t)
	ctx := testCtx(t, time.Minute)
	var armed atomic.Bool
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		return &replyLoser{Conn: c, armed: &armed}, nil
	}
	d := openDriver(t, urlOf(z, "/lost-reply", "session_timeout=4s"), zklock.WithDialer(dial))
	const name = "lost-reply"
	// The lock's node exists, so that the create armed below is the lock
	// node's.
	acquire(t, ctx, d, name, "first", false).Release(ctx)

	armed.Store(true)
	l := acquire(t, ctx, d, name, "owner", false)
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

// TestExpiredSessionIsNotPaperedOver cuts a holder off from ZooKeeper past
// its session timeout. It is told its hold is lost before anyone else gets
// the lock; once it can reach the server again, go-zookeeper opens a new
// session, which serves new acquisitions but never revives the old hold.
func TestExpiredSessionIsNotPaperedOver(t *testing.T) {
	z := standalone.Get(t)
	ctx := testCtx(t, time.Minute)
	url := urlOf(z, "/expiry", "session_timeout=1s")
	const name = "expiry"
	dl := &severable{}
	ca, err := locker.New(openDriver(t, url, zklock.WithDialer(dl.dial)))
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	a := ca.NewMutex(name)
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	b := openClient(t, url).NewMutex(name)

	dl.sever()
	cut := time.Now()
	if err := b.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("the next owner got the lock %v after the holder was cut off", time.Since(cut).Round(time.Millisecond))
	if !closed(a.Lost()) {
		t.Fatal("the next owner got the lock before the cut-off holder was told its hold was lost")
	}
	if b.Token() <= a.Token() {
		t.Errorf("the next owner's token %d is not above the lost holder's %d", b.Token(), a.Token())
	}

	dl.restore()
	// The same Driver serves new acquisitions, in a new session...
	other := ca.NewMutex(name + "-other")
	eventually(t, 30*time.Second, "an acquisition after the connection is back", func() bool {
		ok, err := other.TryLock(ctx)
		return err == nil && ok
	})
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// ...and the old hold stays lost: its Unlock frees nothing.
	if err := a.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
		t.Errorf("Unlock of the expired hold = %v, want ErrLost", err)
	}
	if ok, err := openClient(t, url).NewMutex(name).TryLock(ctx); ok || err != nil {
		t.Errorf("TryLock of a third client = %v, %v; want false: the new owner still holds", ok, err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNamesZooKeeperRefuses(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	d := openDriver(t, urlOf(standalone.Get(t), "/names", ""))
	names := []string{".", "..", "a/b", "a/../b", "/lead", "trail/", "zookeeper", "emoji-🔒", "ctl-\x01\x7f", "priv-\ue000", "%2F", "x\u0085y"}
	var ls []backend.Lease
	for i, n := range names {
		ls = append(ls, acquire(t, ctx, d, n, fmt.Sprint("owner-", i), false))
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
	ctx := testCtx(t, time.Minute)
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
	l := acquire(t, ctx, d, "mine", "owner", false)
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

// TestGivingUpWhileTheServerIsDown cancels a waiter while ZooKeeper does
// not answer (its process is stopped): Acquire must return within its
// cleanup bound rather than hang on the deletion of its node, and the node
// must be gone once the server is back — deleted by the heartbeat, or with
// the session.
func TestGivingUpWhileTheServerIsDown(t *testing.T) {
	z := standalone.Get(t)
	if len(z.Nodes) == 0 {
		t.Skip("needs a ZooKeeper started by testserver, to stop it")
	}
	ctx := testCtx(t, 2*time.Minute)
	url := urlOf(z, "/down", "session_timeout=4s")
	holder, waiter := openDriver(t, url), openDriver(t, url)
	const name = "down"
	l := acquire(t, ctx, holder, name, "holder", false)
	defer l.Release(ctx)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(wctx, backend.Request{Name: name, Owner: "waiter", TTL: time.Minute, Wait: true})
		errc <- err
	}()
	eventually(t, 10*time.Second, "the waiter watches", func() bool { return zklock.Watching(waiter) == 1 })

	n := z.Nodes[0]
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := n.Resume(); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	cancel()
	start := time.Now()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire = %v, want context.Canceled", err)
		}
		t.Logf("the waiter gave up %v after its ctx ended, with the server down", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire did not return within 10s of its ctx ending while the server was down")
	}
	resume()
	eventually(t, 30*time.Second, "no waiter left", func() bool {
		n, err := holder.Waiters(ctx, name)
		return err == nil && n == 0
	})
}

// TestOneReleaseWakesOneWaiter queues many waiters on one lock, releases
// it twice, and counts the watch events the waiters received: one per
// release, however many wait — each waiter watches only the node just below
// its own. All waiters share one Driver, hence one connection, on which
// ZooKeeper delivers events in order: once the second grant is seen, every
// event of the first release has been delivered too.
func TestOneReleaseWakesOneWaiter(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 100
	}
	ctx := testCtx(t, 3*time.Minute)
	url := urlOf(standalone.Get(t), "/herd", "session_timeout=4s")
	d, h := openDriver(t, url), openDriver(t, url)
	const name = "herd"
	hl := acquire(t, ctx, h, name, "holder", false)

	wctx, cancel := context.WithCancel(ctx)
	grants := make(chan backend.Lease, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := d.Acquire(wctx, backend.Request{Name: name, Owner: fmt.Sprint("waiter-", i), TTL: time.Minute, Wait: true})
			switch {
			case err == nil:
				grants <- l
			case !errors.Is(err, context.Canceled):
				t.Errorf("waiter %d: %v", i, err)
			}
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
		close(grants)
		for l := range grants {
			_ = l.Release(ctx)
		}
	}()
	eventually(t, 2*time.Minute, fmt.Sprintf("%d waiters watching", n), func() bool { return zklock.Watching(d) == int64(n) })
	t.Logf("%d waiters queued in %v", n, time.Since(start).Round(time.Millisecond))
	if k, err := d.Waiters(ctx, name); err != nil || k != n {
		t.Fatalf("Waiters = %d, %v; want %d", k, err, n)
	}
	before := zklock.PredecessorEvents(d)

	next := func(what string) backend.Lease {
		t.Helper()
		select {
		case l := <-grants:
			return l
		case <-time.After(30 * time.Second):
			t.Fatalf("no grant after %s", what)
			return nil
		}
	}
	if err := hl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	first := next("the holder's release")
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := next("the first waiter's release")
	defer second.Release(ctx)
	events := zklock.PredecessorEvents(d) - before
	t.Logf("%d waiters, 2 releases: %d watch notifications", n, events)
	if events != 2 {
		t.Errorf("2 releases woke waiters %d times, want 2 (one each)", events)
	}
	if k, err := d.Waiters(ctx, name); err != nil || k != n-2 {
		t.Errorf("Waiters = %d, %v; want %d", k, err, n-2)
	}
}

// TestStaleRenewAndReleaseAfterADrop is the suite's
// spi/stale_renew_and_release_are_refused as it would run for a driver
// whose holds live as long as a session: the hold is made stale by deleting
// its node. (The suite waits for Request.TTL to run out instead, which
// such a driver may ignore, so its version of the check waits in vain.)
func TestStaleRenewAndReleaseAfterADrop(t *testing.T) {
	z := standalone.Get(t)
	ctx := testCtx(t, time.Minute)
	url := urlOf(z, "/stale", "session_timeout=4s")
	da, db := openDriver(t, url), openDriver(t, url)
	const name = "stale"
	la := acquire(t, ctx, da, name, "a", false)
	admin := adminConn(t, z)
	nodes, err := lockChildren(admin, zklock.Dir(da, name))
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes = %v, %v", nodes, err)
	}
	if err := admin.Delete(zklock.Dir(da, name)+"/"+nodes[0], -1); err != nil {
		t.Fatal(err)
	}
	lb := acquire(t, ctx, db, name, "b", true)
	defer lb.Release(ctx)
	select {
	case <-la.Lost():
	case <-time.After(10 * time.Second):
		t.Error("the dropped hold's Lost did not close")
	}
	if err := la.Renew(ctx, time.Second); !errors.Is(err, backend.ErrLost) {
		t.Errorf("the stale owner's Renew = %v, want ErrLost", err)
	}
	if err := la.Release(ctx); !errors.Is(err, backend.ErrLost) {
		t.Errorf("the stale owner's Release = %v, want ErrLost", err)
	}
	if _, err := da.Acquire(ctx, backend.Request{Name: name, Owner: "c", TTL: time.Second}); !errors.Is(err, backend.ErrHeld) {
		t.Errorf("the stale Renew or Release freed the next owner's lock: Acquire = %v", err)
	}
	if err := lb.Renew(ctx, time.Minute); err != nil {
		t.Errorf("the owner's Renew after the stale calls: %v", err)
	}
}

// TestDigestAuthentication opens Drivers with digest credentials: their
// nodes are the creator's only, so a Driver with the same credentials sees
// the lock held, and a client without them cannot touch it.
func TestDigestAuthentication(t *testing.T) {
	z := standalone.Get(t)
	ctx := testCtx(t, time.Minute)
	url := strings.Replace(urlOf(z, "/digest", "session_timeout=4s"), "zk://", "zk://app:S3cr3t-Pw@", 1)
	a, b := openDriver(t, url), openDriver(t, url)
	l := acquire(t, ctx, a, "guarded", "owner", false)
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
	ctx := testCtx(t, time.Minute)
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
		a := acquire(t, ctx, da, name, fmt.Sprintf("a%d", round), false)
		check(fmt.Sprintf("round %d, free lock", round), a)
		// A waiter, granted on a's release.
		got := make(chan backend.Lease, 1)
		go func() {
			l, err := db.Acquire(ctx, backend.Request{Name: name, Owner: fmt.Sprintf("b%d", round), TTL: time.Minute, Wait: true})
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		eventually(t, 10*time.Second, "the waiter's node", func() bool {
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
	z := standalone.Get(t)
	ctx := testCtx(t, time.Minute)
	d := openDriver(t, urlOf(z, "/czxid-changed", ""))
	admin := adminConn(t, z)
	const name = "changed"
	dir := zklock.Dir(d, name)
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
		l := acquire(t, ctx, d, name, fmt.Sprintf("o%d", round), false)
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
	z := standalone.Get(t)
	ctx := testCtx(t, time.Minute)
	d := openDriver(t, urlOf(z, "/no-write", ""))
	admin := adminConn(t, z)
	const name = "no-write"
	dir := zklock.Dir(d, name)
	if _, err := admin.Create(dir[:strings.LastIndexByte(dir, '/')], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	if _, err := admin.Create(dir, nil, 0, zk.WorldACL(zk.PermRead|zk.PermCreate|zk.PermDelete)); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		l := acquire(t, ctx, d, name, fmt.Sprintf("o%d", round), false)
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
