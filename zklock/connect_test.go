package zklock_test

import (
	"net"
	"syscall"
	"testing"

	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/zklock"
)

// TestOpenConnectErrors opens URLs that cannot connect, each with a
// context without deadline, and checks that Open fails within
// DefaultConnectTimeout and says why. ZooKeeper's digest scheme takes any
// credentials (they only name who creates nodes), so no case fails
// authentication; zk:// has no TLS.
func TestOpenConnectErrors(t *testing.T) {
	t.Parallel()
	refused := drivertest.ClosedPort(t)
	silent := drivertest.SilentServer(t)
	drivertest.ConnectErrors(t, zklock.DefaultConnectTimeout, "", zklock.Open, []drivertest.ConnectCase{
		{Name: "refused", URL: "zk://" + refused, Want: []string{"connection refused"}, Is: syscall.ECONNREFUSED},
		{Name: "refused, two servers", URL: "zk://" + refused + "," + drivertest.ClosedPort(t), Want: []string{"connection refused"}},
		{Name: "unknown host", URL: "zk://" + net.JoinHostPort(drivertest.UnknownHost, "2181"), Want: []string{"unknown host"}},
		{Name: "plaintext against a TLS server", URL: "zk://" + drivertest.TLSServer(t), Want: []string{"speaks TLS"}},
		{Name: "silent server", URL: "zk://" + silent, Want: []string{"no answer"}},
		{Name: "silent server, ctx deadline", URL: "zk://" + silent, Want: []string{"deadline exceeded"}, Deadline: zklock.DefaultConnectTimeout / 5},
	})
}
