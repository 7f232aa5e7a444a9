package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/zklock"
)

// servers holds the ZooKeeper deployments shared by this package's tests;
// each starts on the first test that asks for it.
var servers testserver.Shared

var (
	standalone = testserver.NewLazy(&servers, testserver.ZooKeeper)
	ensemble   = testserver.NewLazy(&servers, testserver.ZooKeeperEnsemble)
)

func TestMain(m *testing.M) {
	if os.Getenv(helperURLEnv) != "" {
		os.Exit(helperMain())
	}
	code := servers.Main(m)
	if code == 0 {
		// Every connection is closed by now, and go-zookeeper leaves
		// nothing running after Close, so no goroutine is ignored.
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// urlOf returns the zk:// URL of z with a prefix and parameters.
func urlOf(z *testserver.ZooKeeperServer, prefix, query string) string {
	u := "zk://" + z.ConnectString() + prefix
	if query != "" {
		u += "?" + query
	}
	return u
}

// testCtx returns a context that ends with a generous bound on the test.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// openDriver opens the Driver of url, closed when the test ends.
func openDriver(t *testing.T, url string, opts ...zklock.Option) *zklock.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := zklock.Open(ctx, url, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// openClient returns a locker Client on a new Driver of url, closed when
// the test ends.
func openClient(t *testing.T, url string, opts ...locker.Option) *locker.Client {
	t.Helper()
	c, err := locker.New(openDriver(t, url), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// adminConn returns a plain ZooKeeper connection to z, closed when the test
// ends.
func adminConn(t *testing.T, z *testserver.ZooKeeperServer) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(z.Addrs, 4*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// lockChildren returns the lock nodes of dir in sequence order.
func lockChildren(c *zk.Conn, dir string) ([]string, error) {
	children, _, err := c.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	slices.SortFunc(children, func(a, b string) int { return compareSeq(a, b) })
	return children, err
}

// compareSeq orders lock nodes by their 10-digit sequence suffix.
func compareSeq(a, b string) int {
	sa, sb := a[len(a)-10:], b[len(b)-10:]
	switch {
	case sa < sb:
		return -1
	case sa > sb:
		return 1
	}
	return 0
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// eventually polls cond until it is true or d has passed.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// acquire takes name on d for owner, or fails the test.
func acquire(t *testing.T, ctx context.Context, d backend.Driver, name, owner string, wait bool) backend.Lease {
	t.Helper()
	l, err := d.Acquire(ctx, backend.Request{Name: name, Owner: owner, TTL: time.Minute, Wait: wait})
	if err != nil {
		t.Fatalf("Acquire(%s, %s): %v", name, owner, err)
	}
	return l
}

// severable dials the ensemble and can cut every connection it made, and
// refuse new ones: the process is cut off, its session expires on the
// server after its timeout.
type severable struct {
	mu      sync.Mutex
	severed bool
	conns   []net.Conn
}

var errSevered = errors.New("connection cut by the test")

func (s *severable) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.severed {
		return nil, errSevered
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		s.conns = append(s.conns, c)
	}
	return c, err
}

func (s *severable) sever() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.severed = true
	for _, c := range s.conns {
		_ = c.Close()
	}
}

func (s *severable) restore() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.severed = false
}
