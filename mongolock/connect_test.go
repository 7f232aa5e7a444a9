package mongolock_test

import (
	"net"
	"syscall"
	"testing"

	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/mongolock"
)

// TestOpenConnectErrors opens URLs that cannot connect, each with a
// context without deadline, and checks that Open fails within
// DefaultOpenTimeout and says why. The test server (FerretDB) runs without
// authentication, so no case fails it.
func TestOpenConnectErrors(t *testing.T) {
	t.Parallel()
	plain := mongoServer.Get(t).Addr
	refused, silent := drivertest.ClosedPort(t), drivertest.SilentServer(t)
	drivertest.ConnectErrors(t, mongolock.DefaultOpenTimeout, "", mongolock.Open, []drivertest.ConnectCase{
		{Name: "refused", URL: "mongodb://" + refused + "/db", Want: []string{"connection refused"}, Is: syscall.ECONNREFUSED},
		{Name: "unknown host", URL: "mongodb://" + net.JoinHostPort(drivertest.UnknownHost, "27017") + "/db", Want: []string{"unknown host"}},
		{Name: "TLS against a plaintext server", URL: "mongodb://" + plain + "/db?tls=true", Want: []string{"does not speak TLS"}},
		{Name: "plaintext against a TLS server", URL: "mongodb://" + drivertest.TLSServer(t) + "/db", Want: []string{"speaks TLS"}},
		{Name: "silent server", URL: "mongodb://" + silent + "/db", Want: []string{"no answer"}},
		{Name: "silent server, ctx deadline", URL: "mongodb://" + silent + "/db", Want: []string{"deadline exceeded"}, Deadline: mongolock.DefaultOpenTimeout / 5},
	})
}
