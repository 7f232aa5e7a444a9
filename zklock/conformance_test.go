package zklock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/matrix"
	"github.com/golocker/locker/internal/testserver/zkserver"
	"github.com/golocker/locker/zklock"
)

// suiteSessionTimeout is the session timeout of the suite's drivers: how
// long a crashed holder blocks its locks (10 ticks of the test servers).
// The suite's own TTL (for fixed leases and the renewal check's length) is
// shorter, so that the renewal check outlasts a whole session timeout.
const suiteSessionTimeout = 2 * time.Second

// runSuite runs the conformance suite on drivers of z and records the
// report for the feature matrix under name.
func runSuite(t *testing.T, name string, z *zkserver.ZooKeeperServer) {
	url := urlOf(z, "/conformance", "session_timeout="+suiteSessionTimeout.String())
	probe := openDriver(t, url) // for node paths only
	admin := adminConn(t, z)
	var nets sync.Map // *zklock.Driver → *conformance.FaultNet
	h := conformance.Harness{
		Name: name,
		NewDriver: func(ctx context.Context) (backend.Driver, error) {
			fn := conformance.NewFaultNet()
			d, err := zklock.Open(ctx, url, zklock.WithDialer(fn.Dial))
			if err == nil {
				nets.Store(d, fn)
			}
			return d, err
		},
		// Every connection of the driver, its session's heartbeats and
		// watches included, goes through the suite's FaultNet.
		NewFaultyDriver: drivertest.FaultyOpen(zklock.Open, url, zklock.WithDialer),
		// A crashed process sends nothing more: its connection is cut
		// and never comes back, so its session expires on the server
		// after its timeout, with its nodes.
		Crash: func(d backend.Driver) error {
			zklock.Crash(d.(*zklock.Driver))
			fn, _ := nets.Load(d)
			fn.(*conformance.FaultNet).Cut()
			return nil
		},
		// Drop deletes the holder's node (the lowest of the lock's) with
		// a connection of its own, as an operator would. Its ctx may be
		// the one the drop's own effect cancels (a Do whose hold is
		// dropped), so it does not depend on it.
		Drop: func(_ context.Context, lock string) error {
			// In an ensemble the admin's server may be a follower behind
			// the leader: sync first, or the holder's node may not show
			// yet.
			if _, err := admin.Sync(zklock.Dir(probe, lock)); err != nil {
				return err
			}
			nodes, err := lockChildren(admin, zklock.Dir(probe, lock))
			if err != nil {
				return err
			}
			if len(nodes) == 0 {
				return zk.ErrNoNode
			}
			return admin.Delete(zklock.Dir(probe, lock)+"/"+nodes[0], -1)
		},
		SessionTTL: suiteSessionTimeout,
		TTL:        time.Second,
	}
	if len(z.Nodes) > 1 {
		// An ensemble keeps its data when one server dies: kill the
		// leader.
		h.KillServer = drivertest.KillLeader(t, z.Leader)
	}
	rep := conformance.Run(t, h)
	matrix.Record(t, rep)
}

func TestConformanceStandalone(t *testing.T) {
	runSuite(t, "zk", standalone.Get(t))
}

func TestConformanceEnsemble(t *testing.T) {
	runSuite(t, "zk/ensemble", ensemble.Get(t))
}
