package drivertest

import (
	"context"
	"testing"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/driverkit"
)

// FaultyOpen returns a conformance.Harness.NewFaultyDriver for a driver
// that takes a dial function: it opens url with the driver's open and the
// option withDialer makes of the Dial of a new conformance.FaultNet, so
// that every connection of the driver goes through it.
func FaultyOpen[D backend.Driver, O any](open func(context.Context, string, ...O) (D, error), url string, withDialer func(driverkit.DialFunc) O) func(context.Context) (backend.Driver, conformance.Faults, error) {
	return func(ctx context.Context) (backend.Driver, conformance.Faults, error) {
		fn := conformance.NewFaultNet()
		d, err := open(ctx, url, withDialer(fn.Dial))
		if err != nil {
			return nil, nil, err
		}
		return d, fn, nil
	}
}

// Member is a server of a replicated store that a test can kill and start
// again (etcdserver.EtcdMember, zkserver.ZooKeeperNode).
type Member interface {
	Kill() error
	Restart(context.Context) error
}

// KillLeader returns a conformance.Harness.KillServer for a replicated
// store, which keeps its data when one server dies: it kills the leader
// that leader finds, as a crash would, and returns the function that
// starts it again.
func KillLeader[M Member](t *testing.T, leader func(context.Context) (M, error)) func(context.Context) (func(context.Context) error, error) {
	return func(ctx context.Context) (func(context.Context) error, error) {
		l, err := leader(ctx)
		if err != nil {
			return nil, err
		}
		if err := l.Kill(); err != nil {
			return nil, err
		}
		t.Logf("killed the leader, %v", l)
		return l.Restart, nil
	}
}
