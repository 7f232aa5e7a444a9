package etcdlock_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/etcdlock"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/matrix"
	"github.com/golocker/locker/internal/testserver/etcdserver"
)

// suiteSessionTTL is the session TTL of the suite's drivers: how long a
// crashed holder blocks its locks. The suite's own TTL (for fixed leases
// and the renewal check's length) is shorter, so that the renewal check
// outlasts a whole session TTL.
const suiteSessionTTL = 2 * time.Second

// runSuite runs the conformance suite on drivers of srv and records the
// report for the feature matrix under name.
func runSuite(t *testing.T, name string, srv *etcdserver.EtcdServer) {
	url := urlOf(srv, "/conformance", "session_ttl="+suiteSessionTTL.String())
	probe := openDriver(t, url) // for key ranges only
	admin := adminClient(t, srv)
	h := conformance.Harness{
		Name: name,
		NewDriver: func(ctx context.Context) (backend.Driver, error) {
			return etcdlock.Open(ctx, url)
		},
		// Every connection of the driver, its session's keepalives and
		// its watch included, goes through the suite's FaultNet.
		NewFaultyDriver: drivertest.FaultyOpen(etcdlock.Open, url, etcdlock.WithDialer),
		SessionTTL:      suiteSessionTTL,
		// A crashed process stops sending keepalives and revokes nothing.
		Crash: func(d backend.Driver) error {
			etcdlock.Crash(d.(*etcdlock.Driver))
			return nil
		},
		// Drop deletes the holder's key (the lowest of the name's range)
		// with a client of its own, as an operator would.
		// Its ctx may be the one the drop's own effect cancels (a Do
		// whose hold is dropped), so it does not depend on it.
		Drop: func(ctx context.Context, lock string) error {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			return deleteLowest(ctx, admin, etcdlock.NamePrefix(probe, lock))
		},
		TTL: time.Second,
		// The suite's bound on one check is for hangs. A loaded CI
		// machine running a 3-member cluster with fsync took 17 s for
		// the exclusion check (2–5 s unloaded); the default 60 s left
		// too little room.
		Timeout: 3 * time.Minute,
	}
	if len(srv.Members) > 1 {
		// A cluster keeps its data when one member dies: kill the leader.
		h.KillServer = drivertest.KillLeader(t, srv.Leader)
	}
	matrix.Record(t, conformance.Run(t, h))
}

func TestConformanceSingle(t *testing.T) {
	runSuite(t, "etcd", single.Get(t))
}

func TestConformanceCluster(t *testing.T) {
	runSuite(t, "etcd/cluster", cluster.Get(t))
}

// adminClient returns a plain etcd client of srv, closed when the test ends.
func adminClient(t *testing.T, srv *etcdserver.EtcdServer) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// deleteLowest deletes the key with the lowest create revision under pfx.
func deleteLowest(ctx context.Context, c *clientv3.Client, pfx string) error {
	resp, err := c.Get(ctx, pfx, clientv3.WithFirstCreate()...)
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 {
		return errNoKey
	}
	_, err = c.Delete(ctx, string(resp.Kvs[0].Key))
	return err
}
