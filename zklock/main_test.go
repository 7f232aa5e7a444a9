package zklock_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/zkserver"
	"github.com/golocker/locker/zklock"
)

// servers holds the ZooKeeper deployments shared by this package's tests;
// each starts on the first test that asks for it.
var servers testserver.Shared

var (
	standalone = testserver.NewLazy(&servers, zkserver.ZooKeeper)
	ensemble   = testserver.NewLazy(&servers, zkserver.ZooKeeperEnsemble)
)

func TestMain(m *testing.M) {
	os.Exit(drivertest.Main(m, &servers))
}

// urlOf returns the zk:// URL of z with a prefix and parameters.
func urlOf(z *zkserver.ZooKeeperServer, prefix, query string) string {
	u := "zk://" + z.ConnectString() + prefix
	if query != "" {
		u += "?" + query
	}
	return u
}

// openDriver opens the Driver of url, closed when the test ends.
func openDriver(t *testing.T, url string, opts ...zklock.Option) *zklock.Driver {
	t.Helper()
	return drivertest.Open(t, url, func(ctx context.Context) (*zklock.Driver, error) { return zklock.Open(ctx, url, opts...) })
}

// adminConn returns a plain ZooKeeper connection to z, closed when the test
// ends.
func adminConn(t *testing.T, z *zkserver.ZooKeeperServer) *zk.Conn {
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
