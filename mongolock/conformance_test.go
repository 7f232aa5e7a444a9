package mongolock_test

import (
	"context"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/matrix"
	"github.com/golocker/locker/mongolock"
)

// TestConformance runs the suite, every driver opened from the URL as
// another process would, and records the results for the feature matrix
// under "mongodb". There is no KillServer: FerretDB, the stand-in here,
// makes no promise about its data over a crash.
func TestConformance(t *testing.T) {
	srv := mongoServer.Get(t)
	db := srv.NewDatabase(t)
	ttl, scale, timeout := time.Second, 0, time.Duration(0)
	if srv.FerretDB {
		// FerretDB 1.x, the stand-in where no mongod is installed,
		// serializes writes on one SQLite file and the driver's history
		// mode needs several commands per operation: under the race
		// detector on two cores an operation can take a few hundred
		// milliseconds, and it stalls for a second or two now and then
		// (longer when CI runs every package's tests beside it: a 3s lease
		// once lost a hold whose renewal, sent at 1s, had not returned
		// 1.7s later). A 5s lease keeps renewals in time, and the scale
		// check cycles 1000
		// names instead of 5000 to stay within its time bound.
		// Its stalls also get a longer bound per check.
		ttl, scale, timeout = 5*time.Second, 1000, 3*time.Minute
	}
	rep := conformance.Run(t, conformance.Harness{
		Name: "mongodb",
		NewDriver: func(ctx context.Context) (backend.Driver, error) {
			return mongolock.Open(ctx, db.URI)
		},
		// The fault checks route the driver's connections through a
		// FaultNet.
		NewFaultyDriver: drivertest.FaultyOpen(mongolock.Open, db.URI, mongolock.WithDialer),
		TTL:             ttl,
		Scale:           scale,
		Timeout:         timeout,
	})
	matrix.Record(t, rep)
}
