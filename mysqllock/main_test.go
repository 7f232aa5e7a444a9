package mysqllock_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/mysqllock"
)

// servers holds the database servers shared by this package's tests; each
// starts on the first test that asks for it.
var servers testserver.Shared

var (
	mysqlServer    = testserver.NewLazy(&servers, testserver.StartMySQL)
	postgresServer = testserver.NewLazy(&servers, testserver.StartPostgres)
	sqliteServer   = testserver.NewLazy(&servers, testserver.StartSQLite)
)

func TestMain(m *testing.M) {
	flag.Parse()
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	code := servers.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// dialects are the databases every driver test runs on, by the name their
// conformance results are recorded under.
var dialects = []string{mysqllock.DialectMySQL, mysqllock.DialectPostgres, mysqllock.DialectSQLite}

// newDatabase returns a database of its own for t on the dialect's shared
// server, skipping t (or failing it under LOCKER_REQUIRE_SERVERS=1) if
// there is no such server.
func newDatabase(t *testing.T, dialect string) *testserver.SQLDatabase {
	t.Helper()
	var srv *testserver.SQLServer
	switch dialect {
	case mysqllock.DialectMySQL:
		srv = mysqlServer.Get(t)
	case mysqllock.DialectPostgres:
		srv = postgresServer.Get(t)
	default:
		srv = sqliteServer.Get(t)
	}
	return srv.NewDatabase(t)
}

// testCtx returns a context that ends with a generous bound on the test.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// open opens url, closed when the test ends.
func open(t *testing.T, url string, opts ...mysqllock.Option) *mysqllock.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := mysqllock.Open(ctx, url, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}
