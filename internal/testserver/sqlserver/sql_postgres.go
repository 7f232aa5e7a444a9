package sqlserver

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/golocker/locker/internal/testserver"
)

// EnvPostgresDSN names a PostgreSQL server the user already runs, as a URL:
// "postgres://user:pass@127.0.0.1:5433/postgres?sslmode=disable". The
// account must be allowed to create databases; the URL's database is only
// where CREATE DATABASE and DROP DATABASE run.
const EnvPostgresDSN = "LOCKER_TEST_POSTGRES_DSN"

// PostgresImage is the image used when PostgreSQL is started in a container.
const PostgresImage = "postgres:15"

const postgresInstallHint = "install Debian package postgresql (scripts/install-test-deps.sh)"

// postgresUser is the superuser of servers this package starts. Its
// password is random per server.
const postgresUser = "locker"

// StartPostgres returns a PostgreSQL server: the one named by
// LOCKER_TEST_POSTGRES_DSN, else postgres started on a free loopback port
// with its data in a temp dir (as the OS user postgres, or nobody, when
// the test runs as root), else a container, else it skips (or fails, with
// LOCKER_REQUIRE_SERVERS=1).
func StartPostgres(t testserver.TB) *SQLServer {
	t.Helper()
	return startSQL(t, sqlSource{
		env:       EnvPostgresDSN,
		fromEnv:   postgresFromEnv,
		paths:     postgresPaths,
		start:     startPostgres,
		container: postgresContainer,
		missing:   "no PostgreSQL: postgres or initdb not found (also looked in /usr/lib/postgresql/*/bin)",
		hint:      postgresInstallHint,
	})
}

// postgresPaths finds postgres on PATH or in Debian's versioned directories
// (newest first), and the initdb of the same installation.
func postgresPaths() (server, initdb string) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgDirVersion(dirs[i]) > pgDirVersion(dirs[j]) })
	server = testserver.LookPath([]string{"postgres"}, dirs...)
	if server == "" {
		return "", ""
	}
	real, err := filepath.EvalSymlinks(server)
	if err != nil {
		return "", ""
	}
	initdb = filepath.Join(filepath.Dir(real), "initdb")
	if _, err := os.Stat(initdb); err != nil {
		return "", ""
	}
	return server, initdb
}

func pgDirVersion(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// postgresRunAs returns the OS user to run PostgreSQL as: "" (ourselves)
// unless we are root, which initdb and postgres refuse.
func postgresRunAs() string {
	if os.Geteuid() != 0 {
		return ""
	}
	if _, err := user.Lookup("postgres"); err == nil {
		return "postgres"
	}
	return "nobody"
}

func startPostgres(t testserver.TB, bin, initdb string) *SQLServer {
	t.Helper()
	dir := t.TempDir()
	runAs := postgresRunAs()
	var cred *syscall.Credential
	if runAs != "" {
		// credentialFor gives the user dir and the right to traverse
		// its parents, as StartProcess will again.
		c, err := testserver.CredentialFor(runAs, dir)
		if err != nil {
			t.Fatalf("testserver: postgres: run as %s: %v", runAs, err)
			return nil
		}
		cred = c
	}
	password := testserver.RandomHex(12)
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatalf("testserver: postgres: %v", err)
		return nil
	}
	if cred != nil {
		if err := os.Chown(pwfile, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatalf("testserver: postgres: %v", err)
			return nil
		}
	}
	data := filepath.Join(dir, "data")
	out, err := testserver.RunSetup(2*time.Minute, cred, dir, initdb,
		"-D", data, "-U", postgresUser, "--pwfile="+pwfile,
		"--auth-local=trust", "--auth-host=scram-sha-256",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	_ = os.Remove(pwfile)
	if err != nil {
		t.Fatalf("testserver: initdb: %v\n%s", err, out)
		return nil
	}

	port := testserver.FreePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// The socket lives in our temp dir, not in /var/run/postgresql where
	// the system's server keeps its own; if the path would be too long
	// for a unix socket, there is none (tests use TCP).
	sockDir := ""
	if len(filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port))) <= testserver.MaxSocketPath {
		sockDir = dir
	}
	u := &url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(postgresUser, password),
		Host:     addr,
		Path:     "/postgres",
		RawQuery: "sslmode=disable",
	}
	adminURL := u.String()
	proc := testserver.StartProcess(t, testserver.ProcessSpec{
		Name: "postgres",
		Path: bin,
		Args: []string{"-D", data, "-p", strconv.Itoa(port), "-h", "127.0.0.1", "-k", sockDir,
			// No fsync, and small memory: tests do not wait on the
			// disk and several servers fit side by side. Commits still
			// reach the OS before they are acknowledged, so a killed
			// server loses nothing it confirmed (only a machine crash
			// would); synchronous_commit=off would break that.
			"-c", "fsync=off", "-c", "full_page_writes=off",
			"-c", "shared_buffers=32MB", "-c", "max_connections=300",
		},
		Dir:   dir,
		User:  runAs,
		Ready: func(ctx context.Context) error { return pgExec(ctx, adminURL) },
	})
	if proc == nil {
		return nil
	}
	s := &SQLServer{Dialect: DialectPostgres, Addr: addr, Proc: proc, admin: postgresAdmin{u: u},
		ownGroups: true,
		// SIGTERM is PostgreSQL's "smart" shutdown, which waits for every
		// client to disconnect; end their sessions first, as the "fast"
		// shutdown would, so Stop and Restart take milliseconds.
		preStop: func(ctx context.Context) error {
			return pgExec(ctx, adminURL, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'`)
		},
	}
	// Runs before StartProcess's cleanup (cleanups run last first): a
	// backend that a test paused would otherwise outlive the postmaster.
	t.Cleanup(func() {
		if err := s.Kill(); err != nil {
			t.Logf("testserver: postgres: %v", err)
		}
	})
	return s
}

func postgresFromEnv(t testserver.TB, v string) *SQLServer {
	t.Helper()
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		// url errors quote the whole value, password included.
		t.Fatalf("testserver: %s: not a postgres://user:pass@host:port/db URL", EnvPostgresDSN)
		return nil
	}
	if !checkEnvSQL(t, EnvPostgresDSN, u.Host, func(ctx context.Context) error { return pgExec(ctx, u.String()) }) {
		return nil
	}
	return &SQLServer{Dialect: DialectPostgres, Addr: u.Host, admin: postgresAdmin{u: u}}
}

func postgresContainer(t testserver.TB) *SQLServer {
	t.Helper()
	password := testserver.RandomHex(12)
	addr := testserver.StartContainer(t, testserver.ContainerSpec{
		Image: PostgresImage,
		Port:  "5432/tcp",
		Env:   map[string]string{"POSTGRES_USER": postgresUser, "POSTGRES_PASSWORD": password},
		Cmd:   []string{"postgres", "-c", "fsync=off", "-c", "full_page_writes=off"},
		// The entrypoint runs a temporary server first; the second
		// "ready" line is the real one.
		WaitLog:        "database system is ready to accept connections",
		WaitOccurrence: 2,
	})
	if addr == "" {
		return nil
	}
	u := &url.URL{Scheme: "postgres", User: url.UserPassword(postgresUser, password), Host: addr,
		Path: "/postgres", RawQuery: "sslmode=disable"}
	if !waitContainer(t, "postgres", addr, func(ctx context.Context) error { return pgExec(ctx, u.String()) }) {
		return nil
	}
	return &SQLServer{Dialect: DialectPostgres, Addr: addr, admin: postgresAdmin{u: u}}
}

// postgresAdmin manages databases through the URL of an account that may
// create them.
type postgresAdmin struct{ u *url.URL }

func (a postgresAdmin) create(ctx context.Context, name string) error {
	return pgExec(ctx, a.u.String(), `CREATE DATABASE "`+name+`"`)
}

func (a postgresAdmin) drop(ctx context.Context, name string) error {
	// FORCE (PostgreSQL 13+) ends sessions a test left open.
	err := pgExec(ctx, a.u.String(), `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`)
	var syntax interface{ SQLState() string }
	if errors.As(err, &syntax) && syntax.SQLState() == "42601" {
		err = pgExec(ctx, a.u.String(), `DROP DATABASE IF EXISTS "`+name+`"`)
	}
	return err
}

func (a postgresAdmin) conn(name string) (string, string) {
	u := *a.u
	u.Path = "/" + name
	s := u.String()
	return s, s
}

// pgExec opens one connection with the URL, pings and runs the statements
// in order.
func pgExec(ctx context.Context, dsn string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return scrubPassword(err, dsn)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if err := conn.Ping(ctx); err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// scrubPassword replaces the URL's password in err's message, should pgx
// ever quote it.
func scrubPassword(err error, dsn string) error {
	u, perr := url.Parse(dsn)
	if perr != nil {
		return errors.New("cannot parse connection URL")
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
}
