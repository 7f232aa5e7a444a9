package mongolock_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/mongolock"
)

// servers holds the MongoDB server shared by this package's tests: mongod
// when it is on PATH, else FerretDB.
var servers testserver.Shared

var mongoServer = testserver.NewLazy(&servers, testserver.StartMongo)

func TestMain(m *testing.M) {
	flag.Parse()
	code := servers.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testCtx returns a context that ends with a generous bound on the test.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// open opens url, closed when the test ends.
func open(t *testing.T, url string, opts ...mongolock.Option) *mongolock.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := mongolock.Open(ctx, url, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}
