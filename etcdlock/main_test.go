package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/etcdlock"
	"github.com/golocker/locker/internal/testserver"
)

// servers holds the etcd deployments shared by this package's tests; each
// starts on the first test that asks for it.
var servers testserver.Shared

var (
	single  = testserver.NewLazy(&servers, testserver.Etcd)
	cluster = testserver.NewLazy(&servers, testserver.EtcdCluster)
)

func TestMain(m *testing.M) {
	if os.Getenv(helperURLEnv) != "" {
		os.Exit(helperMain())
	}
	code := servers.Main(m)
	if code == 0 {
		// Every client is closed by now; the etcd client and gRPC leave
		// nothing running after Close, so no goroutine is ignored.
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// urlOf returns the etcd:// URL of srv with a key prefix and parameters.
func urlOf(srv *testserver.EtcdServer, prefix, query string) string {
	u := "etcd://" + strings.Join(srv.Endpoints, ",") + prefix
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
func openDriver(t *testing.T, url string) *etcdlock.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := etcdlock.Open(ctx, url)
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

var errNoKey = errors.New("no key to delete")
