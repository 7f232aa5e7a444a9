package etcdlock_test

import (
	"net"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/golocker/locker/etcdlock"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/etcdserver"
)

// TestOpenConnectErrors opens URLs that cannot connect, each with a
// context without deadline, and checks that Open fails within
// DefaultDialTimeout and says why.
func TestOpenConnectErrors(t *testing.T) {
	t.Parallel()
	pw := testserver.RandomHex(12)
	plain := single.Get(t).Endpoints[0]
	refused := drivertest.ClosedPort(t)
	silent := drivertest.SilentServer(t)
	cases := []drivertest.ConnectCase{
		{Name: "refused", URL: "etcd://" + refused, Want: []string{"connection refused"}, Is: syscall.ECONNREFUSED},
		{Name: "refused, two endpoints", URL: "etcd://" + refused + "," + drivertest.ClosedPort(t), Want: []string{"connection refused"}},
		{Name: "unknown host", URL: "etcd://" + net.JoinHostPort(drivertest.UnknownHost, "2379"), Want: []string{"unknown host"}},
		{Name: "TLS against a plaintext server", URL: "etcd://" + plain + "?tls=true", Want: []string{"not speak TLS"}},
		{Name: "plaintext against a TLS server", URL: "etcd://" + drivertest.TLSServer(t), Want: []string{"speaks TLS"}},
		{Name: "silent server", URL: "etcd://" + silent, Want: []string{"no answer"}},
		{Name: "silent server, ctx deadline", URL: "etcd://" + silent, Want: []string{"deadline exceeded"}, Deadline: etcdlock.DefaultDialTimeout / 5},
	}
	if addr := withAuth(t, pw); addr != "" {
		cases = append(cases, drivertest.ConnectCase{Name: "wrong password", URL: "etcd://root:wrong-" + pw + "@" + addr, Want: []string{"authentication failed"}})
	}
	drivertest.ConnectErrors(t, etcdlock.DefaultDialTimeout, pw, etcdlock.Open, cases)
}

// withAuth starts an etcd of the test's own with authentication on, user
// root with password pw, and returns its endpoint; "" when the servers are
// not started here (one named by the environment is left alone).
func withAuth(t *testing.T, pw string) string {
	srv := etcdserver.Etcd(t)
	if len(srv.Members) == 0 {
		t.Log("no etcd of the test's own: no authentication case")
		return ""
	}
	ctx := drivertest.Context(t, time.Minute)
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.UserAdd(ctx, "root", pw); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	return srv.Endpoints[0]
}
