package mongolock_test

import (
	"context"
	"flag"
	"os"
	"testing"

	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/mongoserver"
	"github.com/golocker/locker/mongolock"
)

// servers holds the MongoDB server shared by this package's tests: mongod
// when it is on PATH, else FerretDB.
var servers testserver.Shared

var mongoServer = testserver.NewLazy(&servers, mongoserver.StartMongo)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(drivertest.Main(m, &servers))
}

// open opens url, closed when the test ends.
func open(t *testing.T, url string, opts ...mongolock.Option) *mongolock.Driver {
	t.Helper()
	return drivertest.Open(t, "the test database", func(ctx context.Context) (*mongolock.Driver, error) { return mongolock.Open(ctx, url, opts...) })
}
