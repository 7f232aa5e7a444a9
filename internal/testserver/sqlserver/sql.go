package sqlserver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"github.com/golocker/locker/internal/testserver"
)

// SQL dialects, named as GORM's dialectors name themselves.
const (
	DialectMySQL    = "mysql"
	DialectPostgres = "postgres"
	DialectSQLite   = "sqlite"
)

// sqlAdminTimeout bounds each CREATE DATABASE or DROP DATABASE.
const sqlAdminTimeout = 15 * time.Second

// SQLServer is a SQL database server, or for SQLite a directory of database
// files. Tests get their own database on it with NewDatabase, so a package
// can share one server across tests (see Shared and Lazy):
//
//	var servers testserver.Shared
//	var mysqlServer = testserver.NewLazy(&servers, testserver.StartMySQL)
//
//	func TestX(t *testing.T) {
//		db := mysqlServer.Get(t).NewDatabase(t)
//		gdb, err := gorm.Open(mysql.Open(db.DSN), &gorm.Config{})
//		...
//	}
//
// Proc is nil when this package did not start the server (an environment
// variable or a container named it, or it is SQLite); the fault hooks then
// return an error.
type SQLServer struct {
	Dialect string              // DialectMySQL, DialectPostgres or DialectSQLite
	Addr    string              // host:port of the server; "" for SQLite
	Proc    *testserver.Process // the server process, nil if not ours
	admin   sqlAdmin

	// preStop, if set, runs before Stop and Restart signal the server.
	preStop func(context.Context) error
	// ownGroups is set when the server's children put themselves in
	// process groups of their own; Pause, Resume and Kill then signal
	// them one by one.
	ownGroups bool
}

// SQLDatabase is one database of its own for a test on a SQLServer. It is
// dropped (or, for SQLite, removed with the test's temp dir) when the test
// that created it ends.
type SQLDatabase struct {
	Server  *SQLServer
	Dialect string // as Server.Dialect
	Name    string // the database name; for SQLite, the file name without ".db"

	// DSN opens the database with GORM: mysql.Open(DSN) from
	// gorm.io/driver/mysql (a go-sql-driver/mysql DSN with parseTime=true),
	// postgres.Open(DSN) from gorm.io/driver/postgres (a postgres:// URL),
	// or sqlite.Open(DSN) from github.com/glebarez/sqlite (the absolute
	// file path). It contains the password.
	DSN string

	// URL names the database as golocker's URLs do:
	// mysql://user:pass@127.0.0.1:PORT/NAME, postgres://user:pass@127.0.0.1:PORT/NAME?sslmode=disable
	// or sqlite:///abs/path/NAME.db. It contains the password.
	URL string
}

// sqlSource is where StartMySQL and StartPostgres find a server of their
// dialect, in order: the environment, binaries to start here, a container.
type sqlSource struct {
	env       string                                     // names a server the user runs
	fromEnv   func(t testserver.TB, v string) *SQLServer // the server env's value v names
	paths     func() (server, setup string)              // the binaries, "" when missing
	start     func(t testserver.TB, server, setup string) *SQLServer
	container func(t testserver.TB) *SQLServer
	missing   string // what is missing when nothing serves
	hint      string // how to install the binaries
}

// startSQL returns the first server src finds, else skips (or fails,
// with LOCKER_REQUIRE_SERVERS=1).
func startSQL(t testserver.TB, src sqlSource) *SQLServer {
	t.Helper()
	if v := testserver.EnvAddr(src.env); v != "" {
		return src.fromEnv(t, v)
	}
	if bin, setup := src.paths(); bin != "" && setup != "" {
		return src.start(t, bin, setup)
	}
	if testserver.DockerAvailable() {
		return src.container(t)
	}
	testserver.Unavailable(t, "%s; %s or set %s", src.missing, src.hint, src.env)
	return nil
}

// checkEnvSQL pings the server at addr that the environment variable env
// names, and fails t when it does not answer within 10s.
func checkEnvSQL(t testserver.TB, env, addr string, ping func(context.Context) error) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ping(ctx); err != nil {
		t.Fatalf("testserver: %s: server at %s: %v", env, addr, err)
		return false
	}
	return true
}

// waitContainer pings the server of a container at addr until it answers,
// and fails t when it does not within a minute; what names the server.
func waitContainer(t testserver.TB, what, addr string, ping func(context.Context) error) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := testserver.PollUntil(ctx, ping); err != nil {
		t.Fatalf("testserver: %s container at %s: %v", what, addr, err)
		return false
	}
	return true
}

// sqlAdmin creates and drops databases on one server and says how to reach
// them. Implementations must be safe for concurrent use.
type sqlAdmin interface {
	create(ctx context.Context, name string) error
	drop(ctx context.Context, name string) error
	conn(name string) (dsn, url string)
}

// MySQL returns a fresh database on a MySQL or MariaDB server started for
// this test (or named by LOCKER_TEST_MYSQL_DSN). Use StartMySQL and
// NewDatabase to share one server across tests.
func MySQL(t testserver.TB) *SQLDatabase {
	t.Helper()
	return testserver.NewDatabaseOn(t, StartMySQL)
}

// Postgres returns a fresh database on a PostgreSQL server started for this
// test (or named by LOCKER_TEST_POSTGRES_DSN). Use StartPostgres and
// NewDatabase to share one server across tests.
func Postgres(t testserver.TB) *SQLDatabase {
	t.Helper()
	return testserver.NewDatabaseOn(t, StartPostgres)
}

// SQLite returns a fresh SQLite database file in a temp dir of the test.
// The file does not exist until the driver creates it.
func SQLite(t testserver.TB) *SQLDatabase {
	t.Helper()
	return StartSQLite(t).NewDatabase(t)
}

// StartSQLite returns a SQLServer whose databases are files in a new temp
// dir of t. It needs nothing installed: tests open the files with a
// pure-Go driver.
func StartSQLite(t testserver.TB) *SQLServer {
	t.Helper()
	return &SQLServer{Dialect: DialectSQLite, admin: sqliteAdmin{dir: t.TempDir()}}
}

// NewDatabase creates a database with a unique name on the server and
// registers a cleanup that drops it when t ends. It is safe to call from
// parallel tests.
func (s *SQLServer) NewDatabase(t testserver.TB) *SQLDatabase {
	t.Helper()
	name := testserver.UniqueDBName(t)
	ctx, cancel := context.WithTimeout(context.Background(), sqlAdminTimeout)
	defer cancel()
	if err := s.admin.create(ctx, name); err != nil {
		t.Fatalf("testserver: %s: create database %s: %v", s.Dialect, name, err)
		return nil
	}
	t.Cleanup(func() {
		if s.Proc != nil && !s.Proc.Running() {
			return // the test stopped the server; its temp dir goes anyway
		}
		ctx, cancel := context.WithTimeout(context.Background(), sqlAdminTimeout)
		defer cancel()
		if err := s.admin.drop(ctx, name); err != nil {
			t.Logf("testserver: %s: drop database %s: %v", s.Dialect, name, err)
		}
	})
	dsn, u := s.admin.conn(name)
	return &SQLDatabase{Server: s, Dialect: s.Dialect, Name: name, DSN: dsn, URL: u}
}

// Kill kills the server with SIGKILL, as a crash would.
func (s *SQLServer) Kill() error {
	return s.proc("kill", func(p *testserver.Process) error {
		kids := s.children(p)
		err := p.Kill()
		testserver.SignalAll(kids, syscall.SIGKILL)
		return errors.Join(err, testserver.WaitGone(kids, 10*time.Second))
	})
}

// Stop stops the server with SIGTERM (SIGKILL after 10s). Open client
// connections are closed by the server, PostgreSQL's included (its SIGTERM
// alone would wait for them).
func (s *SQLServer) Stop() error {
	return s.proc("stop", func(p *testserver.Process) error {
		s.beforeStop(p)
		return p.Stop()
	})
}

// Pause freezes the server with SIGSTOP and returns once it has stopped:
// connections stay open and nothing answers.
func (s *SQLServer) Pause() error {
	return s.proc("pause", func(p *testserver.Process) error {
		if err := p.Pause(); err != nil {
			return err
		}
		kids := s.children(p)
		testserver.SignalAll(kids, syscall.SIGSTOP)
		return testserver.WaitStopped(append(kids, p.Pid()), 5*time.Second)
	})
}

// Resume continues a paused server.
func (s *SQLServer) Resume() error {
	return s.proc("resume", func(p *testserver.Process) error {
		testserver.SignalAll(s.children(p), syscall.SIGCONT)
		return p.Resume()
	})
}

// Restart starts the server again on the same port and data directory, so
// databases and rows survive, and waits until it accepts connections.
func (s *SQLServer) Restart(ctx context.Context) error {
	return s.proc("restart", func(p *testserver.Process) error {
		s.beforeStop(p)
		return p.Restart(ctx)
	})
}

// preStopTimeout bounds preStop.
const preStopTimeout = 3 * time.Second

func (s *SQLServer) beforeStop(p *testserver.Process) {
	if !p.Running() {
		return
	}
	// A paused server's children would never see the shutdown.
	testserver.SignalAll(s.children(p), syscall.SIGCONT)
	if s.preStop == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), preStopTimeout)
	defer cancel()
	// On failure Stop still works: the server gets SIGKILL after its grace.
	_ = s.preStop(ctx)
}

// children returns the server's direct child processes when they leave its
// process group (PostgreSQL's backends call setsid), so that signals to
// the group miss them; nil otherwise.
func (s *SQLServer) children(p *testserver.Process) []int {
	// Once the server has exited its pid may belong to another process.
	if !s.ownGroups || !p.Running() {
		return nil
	}
	return testserver.ChildPIDs(p.Pid())
}

func (s *SQLServer) proc(op string, f func(*testserver.Process) error) error {
	if s == nil || s.Proc == nil {
		what := "<nil>"
		if s != nil {
			what = s.Dialect
		}
		return fmt.Errorf("testserver: cannot %s %s server: not started by this package", op, what)
	}
	return f(s.Proc)
}

// sqliteAdmin keeps each database as NAME.db in dir.
type sqliteAdmin struct{ dir string }

func (a sqliteAdmin) create(context.Context, string) error { return nil }

func (a sqliteAdmin) drop(_ context.Context, name string) error {
	// The temp dir is removed with the test; removing the files early
	// would only race with a test's connections still closing.
	return nil
}

func (a sqliteAdmin) conn(name string) (string, string) {
	path := filepath.Join(a.dir, name+".db")
	return path, "sqlite://" + filepath.ToSlash(path)
}
