package mysqllock_test

import (
	"context"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/sqlserver"
	"github.com/golocker/locker/mysqllock"
)

// servers holds the database servers shared by this package's tests; each
// starts on the first test that asks for it.
var servers testserver.Shared

var (
	mysqlServer    = testserver.NewLazy(&servers, sqlserver.StartMySQL)
	postgresServer = testserver.NewLazy(&servers, sqlserver.StartPostgres)
	sqliteServer   = testserver.NewLazy(&servers, sqlserver.StartSQLite)
)

func TestMain(m *testing.M) {
	flag.Parse()
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	os.Exit(drivertest.Main(m, &servers))
}

// dialects are the databases every driver test runs on, by the name their
// conformance results are recorded under.
var dialects = []string{mysqllock.DialectMySQL, mysqllock.DialectPostgres, mysqllock.DialectSQLite}

// newDatabase returns a database of its own for t on the dialect's shared
// server, skipping t (or failing it under LOCKER_REQUIRE_SERVERS=1) if
// there is no such server.
func newDatabase(t *testing.T, dialect string) *sqlserver.SQLDatabase {
	t.Helper()
	var srv *sqlserver.SQLServer
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

// serverDialects are the dialects with a database server (not SQLite).
var serverDialects = []string{mysqllock.DialectMySQL, mysqllock.DialectPostgres}

// client returns a Client on d with leases of ttl, closed when the test
// ends.
func client(t *testing.T, d backend.Driver, ttl time.Duration) *locker.Client {
	t.Helper()
	c, err := locker.New(d, locker.WithTTL(ttl))
	if err != nil {
		t.Fatalf("locker.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// locked returns a new handle of c on name, locked, or fails the test.
func locked(t *testing.T, ctx context.Context, c *locker.Client, name string, opts ...locker.Option) *locker.Mutex {
	t.Helper()
	m := c.NewMutex(name, opts...)
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock(%s): %v", name, err)
	}
	return m
}

// eachDialect runs test as a parallel subtest per dialect, each with a
// database of its own and a ctx that ends after a minute.
func eachDialect(t *testing.T, test func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context)) {
	forDialects(t, dialects, test)
}

// forDialects is eachDialect on the dialects ds.
func forDialects(t *testing.T, ds []string, test func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context)) {
	for _, dialect := range ds {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			test(t, newDatabase(t, dialect), drivertest.Context(t, time.Minute))
		})
	}
}

// open opens url, closed when the test ends.
func open(t *testing.T, url string, opts ...mysqllock.Option) *mysqllock.Driver {
	t.Helper()
	return drivertest.Open(t, "the test database", func(ctx context.Context) (*mysqllock.Driver, error) { return mysqllock.Open(ctx, url, opts...) })
}
