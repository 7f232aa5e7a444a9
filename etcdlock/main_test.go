package etcdlock_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/golocker/locker/etcdlock"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/etcdserver"
)

// servers holds the etcd deployments shared by this package's tests; each
// starts on the first test that asks for it.
var servers testserver.Shared

var (
	single  = testserver.NewLazy(&servers, etcdserver.Etcd)
	cluster = testserver.NewLazy(&servers, etcdserver.EtcdCluster)
)

func TestMain(m *testing.M) {
	os.Exit(drivertest.Main(m, &servers))
}

// urlOf returns the etcd:// URL of srv with a key prefix and parameters.
func urlOf(srv *etcdserver.EtcdServer, prefix, query string) string {
	u := "etcd://" + strings.Join(srv.Endpoints, ",") + prefix
	if query != "" {
		u += "?" + query
	}
	return u
}

// openDriver opens the Driver of url, closed when the test ends.
func openDriver(t *testing.T, url string) *etcdlock.Driver {
	t.Helper()
	return drivertest.Open(t, url, func(ctx context.Context) (*etcdlock.Driver, error) { return etcdlock.Open(ctx, url) })
}

var errNoKey = errors.New("no key to delete")
