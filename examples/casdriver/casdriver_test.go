package casdriver_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/examples/casdriver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	store := casdriver.NewStore()
	conformance.Run(t, conformance.Harness{
		Name:      "casdriver",
		NewDriver: func(context.Context) (backend.Driver, error) { return casdriver.New(store), nil },
		// The store has no force-release; the harness drops a hold by
		// writing the record directly, as an operator or a failover would.
		Drop: func(_ context.Context, name string) error {
			for {
				old := store.Get(name)
				if store.CompareAndSwap(name, old, casdriver.Record{}) {
					return nil
				}
			}
		},
	})
	if n := store.Len(); n != 0 {
		t.Errorf("the store keeps %d records after the suite", n)
	}
}
