package locallock_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/matrix"
	"github.com/golocker/locker/locallock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	store := locallock.NewStore()
	rep := conformance.Run(t, conformance.Harness{
		Name: "mem",
		NewDriver: func(context.Context) (backend.Driver, error) {
			return locallock.New(store), nil
		},
		Footprint: func(context.Context) (int, error) { return store.Len(), nil },
		TTL:       300 * time.Millisecond,
	})
	matrix.Record(t, rep)
	if n := store.Len(); n != 0 {
		t.Errorf("the store keeps state for %d names after the suite", n)
	}
}
