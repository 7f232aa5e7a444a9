package zkserver

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/golocker/locker/internal/testserver"
)

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

func zkConnect(t *testing.T, z *ZooKeeperServer, sessionTimeout time.Duration) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(z.Addrs, sessionTimeout, zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// zkSmoke creates and reads a node, then takes a lock-shaped
// ephemeral-sequential node under it and deletes it with its version.
func zkSmoke(t *testing.T, c *zk.Conn) {
	t.Helper()
	root := "/testserver-" + strings.ReplaceAll(t.Name(), "/", "-")
	if _, err := c.Create(root, []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create %s: %v", root, err)
	}
	if b, _, err := c.Get(root); err != nil || string(b) != "v" {
		t.Fatalf("get = %q, %v", b, err)
	}
	p1, err := c.Create(root+"/lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatalf("create ephemeral-sequential: %v", err)
	}
	p2, err := c.Create(root+"/lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil || p2 <= p1 {
		t.Fatalf("second node %q (after %q): %v", p2, p1, err)
	}
	_, st, err := c.Get(p1)
	if err != nil {
		t.Fatal(err)
	}
	if st.EphemeralOwner != c.SessionID() {
		t.Fatalf("ephemeral owner %d, session %d", st.EphemeralOwner, c.SessionID())
	}
	if err := c.Delete(p1, st.Version+1); !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("delete with a wrong version = %v, want ErrBadVersion", err)
	}
	if err := c.Delete(p1, st.Version); err != nil {
		t.Fatal(err)
	}
}

func zkProcs(z *ZooKeeperServer) []*testserver.Process {
	return testserver.ProcessesOf(z.Nodes, func(n *ZooKeeperNode) *testserver.Process { return n.Proc })
}

func TestZooKeeper(t *testing.T) {
	t.Parallel()

	testserver.RunServer(t, &tracked, "standalone_with_short_sessions", ZooKeeper, zkProcs, func(t *testing.T, z *ZooKeeperServer) {
		zkSmoke(t, zkConnect(t, z, 5*time.Second))
		if len(z.Nodes) == 0 {
			return
		}
		// A 600ms session expires soon after its client goes silent.
		var part partition
		c, _, err := zk.Connect(z.Addrs, 600*time.Millisecond, zk.WithLogger(nopLogger{}), zk.WithDialer(part.dial))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		p, err := c.Create("/short-session", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		part.cut.Store(true)
		watcher := zkConnect(t, z, 5*time.Second)
		deadline := time.Now().Add(10 * time.Second)
		for {
			ok, _, err := watcher.Exists(p)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("ephemeral node outlived its silent session by 10s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("ephemeral node of a 600ms session gone %v after its client went silent", time.Since(begin).Round(time.Millisecond))
	})

	testserver.RunServer(t, &tracked, "ensemble_survives_leader_kill", ZooKeeperEnsemble, zkProcs, func(t *testing.T, z *ZooKeeperServer) {
		c := zkConnect(t, z, 10*time.Second)
		zkSmoke(t, c)
		if len(z.Nodes) != 3 {
			t.Skip("needs an ensemble started by this package")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		leader, err := z.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		if err := leader.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := z.WaitServing(ctx); err != nil {
			t.Fatal(err)
		}
		newLeader, err := z.Leader(ctx)
		if err != nil || newLeader == leader {
			t.Fatalf("leader after kill = %v, %v", newLeader, err)
		}
		t.Logf("leader moved from %v to %v in %v", leader, newLeader, time.Since(begin).Round(time.Millisecond))
		for {
			_, err := c.Create("/after-leader-kill", nil, 0, zk.WorldACL(zk.PermAll))
			if err == nil {
				break
			}
			if ctx.Err() != nil || !errors.Is(err, zk.ErrConnectionClosed) && !errors.Is(err, zk.ErrNoServer) {
				t.Fatalf("create after leader kill: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := leader.Restart(ctx); err != nil {
			t.Fatalf("restart old leader: %v", err)
		}
		if err := z.WaitServing(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// partition is a zk.Dialer whose connections go silent when cut is set:
// writes are dropped and new dials refused, as if the network had failed.
type partition struct{ cut atomic.Bool }

func (p *partition) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	if p.cut.Load() {
		return nil, errors.New("partitioned")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &silentConn{Conn: c, p: p}, nil
}

type silentConn struct {
	net.Conn
	p *partition
}

func (c *silentConn) Write(b []byte) (int, error) {
	if c.p.cut.Load() {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// tracked holds the server processes these tests started: TestMain fails
// the run if one of them, or a goroutine, outlived the tests.
var tracked testserver.Tracker

func TestMain(m *testing.M) { os.Exit(tracked.MainChecked(m, func() error { return goleak.Find() })) }
