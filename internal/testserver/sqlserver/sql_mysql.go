package sqlserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/golocker/locker/internal/testserver"
)

// EnvMySQLDSN names a MySQL or MariaDB server the user already runs, as a
// go-sql-driver/mysql DSN ("user:pass@tcp(127.0.0.1:3307)/") or a URL
// ("mysql://user:pass@127.0.0.1:3307/"). The account must be allowed to
// create and drop databases; the database in the DSN is ignored.
const EnvMySQLDSN = "LOCKER_TEST_MYSQL_DSN"

// MariaDBImage is the image used when MariaDB is started in a container.
const MariaDBImage = "mariadb:10.11"

const mariadbInstallHint = "install Debian package mariadb-server (scripts/install-test-deps.sh)"

// mysqlUser is the account tests use on servers this package starts. Its
// password is random per server, so a test can check that it never shows
// up in an error.
const mysqlUser = "locker"

// StartMySQL returns a MySQL-compatible server: the one named by
// LOCKER_TEST_MYSQL_DSN, else a mariadbd started on a free loopback port
// with its data in a temp dir, else a container, else it skips (or fails,
// with LOCKER_REQUIRE_SERVERS=1).
func StartMySQL(t testserver.TB) *SQLServer {
	t.Helper()
	return startSQL(t, sqlSource{
		env:       EnvMySQLDSN,
		fromEnv:   mysqlFromEnv,
		paths:     mariadbPaths,
		start:     startMariaDB,
		container: mariadbContainer,
		missing:   "no MySQL/MariaDB: mariadbd or mariadb-install-db not found",
		hint:      mariadbInstallHint,
	})
}

func mariadbPaths() (server, install string) {
	dirs := []string{"/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/mysql/bin"}
	return testserver.LookPath([]string{"mariadbd"}, dirs...), testserver.LookPath([]string{"mariadb-install-db"}, dirs...)
}

func startMariaDB(t testserver.TB, bin, install string) *SQLServer {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	sock := filepath.Join(testserver.SocketDir(t, dir, "mysqld.sock"), "mysqld.sock")
	port := testserver.FreePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	// Small InnoDB buffers and log, and no fsync at commit: the server
	// starts in a fraction of a second and tests do not wait on the disk.
	// With flush-log-at-trx-commit=2 each commit still reaches the OS
	// before it is acknowledged, so a killed server loses nothing it
	// confirmed (only a machine crash would); 0 would lose up to a second.
	tuning := []string{
		"--innodb-buffer-pool-size=32M",
		"--innodb-log-file-size=8M",
		"--innodb-flush-log-at-trx-commit=2",
		"--innodb-doublewrite=0",
		"--innodb-use-native-aio=0",
		"--skip-name-resolve",
	}
	var asRoot []string
	if os.Geteuid() == 0 {
		asRoot = []string{"--user=root"}
	}

	args := append([]string{"--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db"}, asRoot...)
	args = append(args, tuning...)
	if out, err := testserver.RunSetup(2*time.Minute, nil, dir, install, args...); err != nil {
		t.Fatalf("testserver: %s: %v\n%s", filepath.Base(install), err, out)
		return nil
	}

	root := mysql.NewConfig()
	root.User, root.Net, root.Addr = "root", "unix", sock
	rootDSN := root.FormatDSN()
	args = append([]string{"--no-defaults", "--datadir=" + data,
		"--socket=" + sock,
		"--port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--pid-file=" + filepath.Join(dir, "mariadbd.pid"),
		"--tmpdir=" + dir,
		"--skip-log-bin",
		"--performance-schema=OFF",
		// Debian's packaged configuration uses utf8mb4 with a
		// case-insensitive collation; so do we, so that tests meet what
		// users run ("A" and "a" compare equal).
		"--character-set-server=utf8mb4",
		"--collation-server=utf8mb4_general_ci",
		"--max-connections=500",
	}, asRoot...)
	args = append(args, tuning...)
	proc := testserver.StartProcess(t, testserver.ProcessSpec{
		Name:  "mariadb",
		Path:  bin,
		Args:  args,
		Dir:   dir,
		Ready: func(ctx context.Context) error { return mysqlPing(ctx, rootDSN) },
	})
	if proc == nil {
		return nil
	}

	password := testserver.RandomHex(12)
	ctx, cancel := context.WithTimeout(context.Background(), sqlAdminTimeout)
	defer cancel()
	err := mysqlExec(ctx, rootDSN,
		fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'", mysqlUser, password),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO '%s'@'127.0.0.1' WITH GRANT OPTION", mysqlUser),
	)
	if err != nil {
		t.Fatalf("testserver: mariadb: creating user %s: %v", mysqlUser, err)
		return nil
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = mysqlUser, password, "tcp", addr
	return &SQLServer{Dialect: DialectMySQL, Addr: addr, Proc: proc, admin: mysqlAdmin{cfg: cfg}}
}

func mysqlFromEnv(t testserver.TB, v string) *SQLServer {
	t.Helper()
	cfg, err := parseMySQLDSN(v)
	if err != nil {
		t.Fatalf("testserver: %s: %v", EnvMySQLDSN, err)
		return nil
	}
	if !checkEnvSQL(t, EnvMySQLDSN, cfg.Addr, func(ctx context.Context) error { return mysqlPing(ctx, cfg.FormatDSN()) }) {
		return nil
	}
	s := &SQLServer{Dialect: DialectMySQL, admin: mysqlAdmin{cfg: cfg}}
	if cfg.Net == "tcp" {
		s.Addr = cfg.Addr
	}
	return s
}

// parseMySQLDSN accepts a go-sql-driver/mysql DSN or a mysql:// URL and
// returns its configuration with no database selected.
func parseMySQLDSN(v string) (*mysql.Config, error) {
	if rest, ok := strings.CutPrefix(v, "mysql://"); ok {
		u, err := url.Parse("mysql://" + rest)
		if err != nil {
			return nil, errors.New("not a valid mysql:// URL") // url errors quote the password
		}
		cfg := mysql.NewConfig()
		cfg.Net, cfg.Addr = "tcp", u.Host
		if u.Port() == "" {
			cfg.Addr = net.JoinHostPort(u.Hostname(), "3306")
		}
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
		return cfg, nil
	}
	cfg, err := mysql.ParseDSN(v)
	if err != nil {
		return nil, fmt.Errorf("neither a mysql:// URL nor a valid DSN: %w", err)
	}
	cfg.DBName = ""
	return cfg, nil
}

func mariadbContainer(t testserver.TB) *SQLServer {
	t.Helper()
	password := testserver.RandomHex(12)
	addr := testserver.StartContainer(t, testserver.ContainerSpec{
		Image: MariaDBImage,
		Port:  "3306/tcp",
		Env:   map[string]string{"MARIADB_ROOT_PASSWORD": password},
		// The entrypoint runs a temporary server first; the second
		// "ready" line is the real one.
		WaitLog:        "ready for connections",
		WaitOccurrence: 2,
	})
	if addr == "" {
		return nil
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = "root", password, "tcp", addr
	if !waitContainer(t, "mariadb", addr, func(ctx context.Context) error { return mysqlPing(ctx, cfg.FormatDSN()) }) {
		return nil
	}
	return &SQLServer{Dialect: DialectMySQL, Addr: addr, admin: mysqlAdmin{cfg: cfg}}
}

// mysqlAdmin manages databases through an account that may create them.
type mysqlAdmin struct{ cfg *mysql.Config }

func (a mysqlAdmin) create(ctx context.Context, name string) error {
	return mysqlExec(ctx, a.cfg.FormatDSN(), "CREATE DATABASE `"+name+"`")
}

func (a mysqlAdmin) drop(ctx context.Context, name string) error {
	// A test's transaction still open on the database would make DROP
	// wait for its metadata lock; give up after a few seconds instead.
	return mysqlExec(ctx, a.cfg.FormatDSN(),
		"SET SESSION lock_wait_timeout = 5",
		"DROP DATABASE IF EXISTS `"+name+"`")
}

func (a mysqlAdmin) conn(name string) (string, string) {
	cfg := a.cfg.Clone()
	cfg.DBName = name
	cfg.ParseTime = true
	u := ""
	if cfg.Net == "tcp" {
		u = (&url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + name}).String()
	}
	return cfg.FormatDSN(), u
}

// mysqlPing opens one connection with dsn and pings it.
func mysqlPing(ctx context.Context, dsn string) error {
	return mysqlExec(ctx, dsn)
}

// mysqlExec runs statements in order on one connection opened with dsn.
func mysqlExec(ctx context.Context, dsn string, stmts ...string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.PingContext(ctx); err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return nil
}
