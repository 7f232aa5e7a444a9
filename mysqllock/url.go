package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// URL schemes of the driver.
const (
	SchemeMySQL      = "mysql"
	SchemeMariaDB    = "mariadb" // the MySQL dialect
	SchemePostgres   = "postgres"
	SchemePostgreSQL = "postgresql"
	SchemeSQLite     = "sqlite"
)

func init() {
	for _, s := range []string{SchemeMySQL, SchemeMariaDB, SchemePostgres, SchemePostgreSQL, SchemeSQLite} {
		locker.Register(s, func(ctx context.Context, u *url.URL) (backend.Driver, error) {
			return openURL(ctx, u, nil)
		})
	}
}

// Defaults of drivers opened from a URL.
const (
	defaultMaxConns    = 16
	defaultBusyTimeout = 5 * time.Second
)

// DefaultOpenTimeout bounds Open of a mysql:// or postgres:// URL when its
// ctx has no deadline.
const DefaultOpenTimeout = driverkit.OpenTimeout

// Open opens the database that rawURL names (see the package doc for the
// forms) with its own connection pool, checks that it answers, and returns
// a Driver whose Close closes the pool. opts apply after the URL's
// parameters. It returns when ctx ends, and within DefaultOpenTimeout when
// ctx has no deadline. Errors name the address tried and the cause
// (connection refused, unknown host, TLS that the server does not speak,
// authentication failed), and never show the password.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Driver, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, driverkit.BadURL("mysqllock", "malformed URL")
	}
	return openURL(ctx, u, opts)
}

// target is what a URL says: how to reach the database, and the driver's
// options.
type target struct {
	dialect  string
	addr     string // what errors name: host:port, hosts, or the SQLite file
	maxConns int
	opts     []Option

	mysql       *mysql.Config
	postgresDSN string
	sqlitePath  string
	busyTimeout time.Duration // SQLite's busy_timeout
}

func openURL(ctx context.Context, u *url.URL, extra []Option) (*Driver, error) {
	d, err := openTarget(ctx, u, extra)
	return d, driverkit.Scrub(err, u)
}

func openTarget(ctx context.Context, u *url.URL, extra []Option) (*Driver, error) {
	t, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	opts := append(t.opts, extra...)
	o := defaultOptions()
	if err := driverkit.Apply(&o, opts); err != nil {
		return nil, err
	}
	if t.sqlitePath == "" {
		ctx, cancel := driverkit.OpenContext(ctx, DefaultOpenTimeout)
		defer cancel()
		return withCtx(ctx, t, func() (*Driver, error) { return openOnce(ctx, t, o, opts) })
	}
	if o.dialer != nil {
		return nil, driverkit.BadOption("mysqllock", "WithDialer: SQLite has no network")
	}
	// A default path such as ~/.local/state/app/locks.db works on first
	// use.
	if err := os.MkdirAll(filepath.Dir(t.sqlitePath), 0o755); err != nil {
		return nil, fmt.Errorf("mysqllock: sqlite: %w", err)
	}
	// Switching a new SQLite file to WAL takes its exclusive lock, and a
	// process that meets another one doing it gets SQLITE_BUSY at once
	// (SQLite does not wait for that lock, whatever busy_timeout says).
	// Processes started together are normal, so opening retries a busy
	// file for as long as a statement would wait.
	deadline := time.Now().Add(t.busyTimeout)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		d, err := openOnce(ctx, t, o, opts)
		if err == nil || !retryable(err) || time.Now().Add(wait).After(deadline) {
			return d, err
		}
		driverkit.Sleep(ctx, wait)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("mysqllock: open %s: %w (after: %w)", t.addr, ctx.Err(), err)
		}
	}
}

// withCtx runs open and returns its result, or ctx's error as soon as ctx
// ends: a driver that does not honour ctx while it connects cannot hold
// Open up. A Driver that open returns after that is closed.
func withCtx(ctx context.Context, t *target, open func() (*Driver, error)) (*Driver, error) {
	d, err := driverkit.Within(ctx, open, func(d *Driver) { _ = d.Close() })
	if err != nil && err == ctx.Err() { // ctx ended first
		return nil, fmt.Errorf("mysqllock: connect to %s at %s: %w", t.dialect, t.addr, connectError(err, t))
	}
	return d, err
}

// connectError names the cause of err, an error of connecting to the
// database of t (driverkit.Cause).
func connectError(err error, t *target) error {
	tlsOn := t.mysql != nil && t.mysql.TLSConfig != "" && t.mysql.TLSConfig != "false" ||
		strings.Contains(t.postgresDSN, "sslmode=require") || strings.Contains(t.postgresDSN, "sslmode=verify")
	return driverkit.ConnectError(err, tlsOn, sqlConnectCause)
}

// sqlConnectCause tells the refusals of the credentials, and a server
// without TLS, as each database's client reports them.
func sqlConnectCause(err error) string {
	var me *mysql.MySQLError
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &me) && (me.Number == 1045 || me.Number == 1698): // ER_ACCESS_DENIED_ERROR, ER_ACCESS_DENIED_NO_PASSWORD_ERROR
		return driverkit.CauseAuth
	case errors.As(err, &pe) && (pe.Code == "28P01" || pe.Code == "28000"): // invalid_password, invalid_authorization_specification
		return driverkit.CauseAuth
	case errors.Is(err, mysql.ErrNoTLS), strings.Contains(err.Error(), "server refused TLS connection"):
		return driverkit.CauseNotTLS
	}
	return ""
}

// openOnce opens the database of t and a Driver on it.
func openOnce(ctx context.Context, t *target, o options, opts []Option) (*Driver, error) {
	log := newLogSink()
	var dialector gorm.Dialector
	switch t.dialect {
	case DialectMySQL:
		cfg := t.mysql.Clone()
		cfg.Logger = log // "closing bad idle connection" and the like
		cfg.DialFunc = o.dialer
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, driverkit.BadURL("mysqllock", "%v", err)
		}
		dialector = gormmysql.New(gormmysql.Config{Conn: sql.OpenDB(conn), SkipInitializeWithVersion: true})
	case DialectPostgres:
		cfg, err := pgx.ParseConfig(t.postgresDSN)
		if err != nil {
			return nil, driverkit.BadURL("mysqllock", "postgres: %v", err)
		}
		if o.dialer != nil {
			cfg.DialFunc = o.dialer
		}
		dialector = postgres.New(postgres.Config{Conn: stdlib.OpenDB(*cfg)})
	default:
		dialector = &sqlite.Dialector{DSN: sqliteDSN(t.sqlitePath, t.busyTimeout), DriverName: "sqlite"}
	}
	gdb, err := gorm.Open(dialector, &gorm.Config{
		Logger:                 logger.Discard,
		DisableAutomaticPing:   true,
		SkipDefaultTransaction: true,
	})
	if err != nil {
		return nil, fmt.Errorf("mysqllock: open %s at %s: %w", t.dialect, t.addr, err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, err
	}
	// The pool: max_conns for acquisitions, renewals and releases, and
	// the wait connections beside them (WithWaitConns).
	size := t.maxConns
	if t.dialect != DialectSQLite {
		size += o.waitConns
	}
	sqlDB.SetMaxOpenConns(size)
	sqlDB.SetMaxIdleConns(size)
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("mysqllock: connect to %s at %s: %w", t.dialect, t.addr, connectError(err, t))
	}
	d, err := newDriver(gdb, true, log, append(opts, poolConns(t.maxConns)))
	if err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	return d, nil
}

// Query parameters: golocker's (every scheme), and the database driver's
// that a URL may give, per scheme.
var (
	ownParams      = []string{"table", "create_table", "max_conns", "wait_conns", "shared_lease"}
	mysqlParams    = []string{"tls", "timeout", "read_timeout", "write_timeout", "allow_native_passwords", "allow_cleartext_passwords"}
	postgresParams = []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword", "sslsni",
		"connect_timeout", "application_name", "target_session_attrs"}
	sqliteParams = []string{"busy_timeout"}
)

// parseURL turns a URL into a target. Every query parameter must be
// golocker's or one listed for the scheme's database driver.
func parseURL(u *url.URL) (*target, error) {
	bad := func(format string, a ...any) error { return driverkit.BadURL("mysqllock", format, a...) }
	if u.Fragment != "" {
		return nil, bad("a fragment (#...) is not allowed")
	}
	scheme := strings.ToLower(u.Scheme)
	t := &target{maxConns: defaultMaxConns, busyTimeout: defaultBusyTimeout}
	var theirs []string
	switch scheme {
	case SchemeMySQL, SchemeMariaDB:
		t.dialect, theirs = DialectMySQL, mysqlParams
	case SchemePostgres, SchemePostgreSQL:
		t.dialect, theirs = DialectPostgres, postgresParams
	case SchemeSQLite:
		t.dialect, theirs = DialectSQLite, sqliteParams
	default:
		return nil, bad("scheme %q is not mysql, mariadb, postgres, postgresql or sqlite", u.Scheme)
	}
	q, keys, err := driverkit.Query(u.RawQuery, slices.Concat(ownParams, theirs))
	if err != nil {
		return nil, bad("%s://: %v (see the mysqllock package doc)", scheme, err)
	}
	driverParams := url.Values{}
	for _, k := range keys {
		v := q.Get(k)
		switch k {
		case "table":
			t.opts = append(t.opts, WithTable(v))
		case "create_table", "shared_lease":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, bad("%s=%q: want true or false", k, v)
			}
			switch k {
			case "shared_lease":
				t.opts = append(t.opts, WithSharedLease(b))
			default:
				t.opts = append(t.opts, WithCreateTable(b))
			}
		case "max_conns":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, bad("max_conns=%q: want a positive integer", v)
			}
			if t.dialect == DialectSQLite {
				return nil, bad("max_conns applies to mysql:// and postgres://: sqlite:// uses one connection per process")
			}
			t.maxConns = n
		case "wait_conns":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, bad("wait_conns=%q: want 0 or a positive integer", v)
			}
			if t.dialect == DialectSQLite && n > 0 {
				return nil, bad("wait_conns applies to mysql:// and postgres://: SQLite has no lock to wait on")
			}
			t.opts = append(t.opts, WithWaitConns(n))
		case "busy_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || (d > 0 && d < time.Millisecond) {
				// SQLite counts it in whole milliseconds.
				return nil, bad("busy_timeout=%q: want 0 or a duration of 1ms or more, such as 5s", v)
			}
			t.busyTimeout = d
		default:
			driverParams.Set(k, v)
		}
	}
	switch t.dialect {
	case DialectMySQL:
		err = t.parseMySQL(u, driverParams)
	case DialectPostgres:
		err = t.parsePostgres(u, driverParams)
	default:
		err = t.parseSQLite(u)
	}
	if err != nil {
		return nil, err
	}
	// Option errors (a bad table name) are URL errors here.
	o := defaultOptions()
	if err := driverkit.Apply(&o, t.opts); err != nil {
		return nil, bad("%v", err)
	}
	if _, err := quoteTable(t.dialect, o.table); err != nil {
		return nil, bad("%v", err)
	}
	return t, nil
}

func (t *target) parseMySQL(u *url.URL, p url.Values) error {
	if u.Opaque != "" || u.Host == "" {
		return driverkit.BadURL("mysqllock", "want mysql://[user[:password]@]host[:3306]/database")
	}
	hosts, err := driverkit.Hosts(u.Host, "3306")
	if err != nil || len(hosts) != 1 {
		return driverkit.BadURL("mysqllock", "mysql:// takes one host[:port]")
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return driverkit.BadURL("mysqllock", "mysql:// needs a database: mysql://host:3306/DATABASE")
	}
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", hosts[0], db
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	// One round trip per statement instead of prepare, execute, close;
	// the driver escapes for the connection's character set.
	cfg.InterpolateParams = true
	for k, vs := range p {
		v := vs[0]
		switch k {
		case "tls":
			if !slices.Contains([]string{"true", "false", "skip-verify", "preferred"}, v) {
				err = fmt.Errorf("want true, false, skip-verify or preferred")
			}
			cfg.TLSConfig = v
		case "timeout":
			cfg.Timeout, err = nonNegative(v)
		case "read_timeout":
			cfg.ReadTimeout, err = nonNegative(v)
		case "write_timeout":
			cfg.WriteTimeout, err = nonNegative(v)
		case "allow_native_passwords":
			cfg.AllowNativePasswords, err = strconv.ParseBool(v)
		case "allow_cleartext_passwords":
			cfg.AllowCleartextPasswords, err = strconv.ParseBool(v)
		}
		if err != nil {
			return driverkit.BadURL("mysqllock", "%s=%q: %v", k, v, err)
		}
	}
	t.mysql, t.addr = cfg, cfg.Addr
	return nil
}

// nonNegative parses a timeout of the MySQL driver, where 0 means none.
func nonNegative(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil && d < 0 {
		err = fmt.Errorf("negative (0 means no timeout)")
	}
	return d, err
}

func (t *target) parsePostgres(u *url.URL, p url.Values) error {
	if u.Opaque != "" || u.Host == "" {
		return driverkit.BadURL("mysqllock", "want postgres://[user[:password]@]host[:5432][,host2[:5432]]/database")
	}
	if _, err := driverkit.Hosts(u.Host, "5432"); err != nil {
		return driverkit.BadURL("mysqllock", "postgres://: %v", err)
	}
	if strings.Contains(strings.TrimPrefix(u.Path, "/"), "/") {
		return driverkit.BadURL("mysqllock", "postgres:// path must be /DATABASE")
	}
	pu := url.URL{Scheme: "postgres", User: u.User, Host: u.Host, Path: u.Path, RawQuery: p.Encode()}
	t.postgresDSN, t.addr = pu.String(), u.Host
	return nil
}

var windowsDrive = regexp.MustCompile(`^/[A-Za-z]:/`)

func (t *target) parseSQLite(u *url.URL) error {
	if u.User != nil {
		return driverkit.BadURL("mysqllock", "sqlite:// takes no user or password")
	}
	if u.Opaque != "" || (u.Host != "" && u.Host != "localhost") {
		return driverkit.BadURL("mysqllock", "want sqlite:///absolute/path/to/file.db (three slashes); a relative path would differ between processes started in different directories")
	}
	path := u.Path
	if runtime.GOOS == "windows" && windowsDrive.MatchString(path) {
		path = path[1:]
	}
	if path == "" || strings.HasSuffix(path, "/") || !filepath.IsAbs(path) {
		return driverkit.BadURL("mysqllock", "sqlite:// needs the absolute path of a file: sqlite:///var/lib/app/locks.db")
	}
	t.sqlitePath = filepath.Clean(path)
	t.addr = t.sqlitePath
	// One connection per process: statements queue in database/sql
	// instead of polling SQLite's file lock against each other; other
	// processes are kept in order by the lock and busy_timeout.
	t.maxConns = 1
	return nil
}

// sqliteDSN is a file: URI for path with the settings every connection
// needs: a busy timeout, so that a writer waits for another process's
// statement instead of failing, and WAL, so that readers and the writer do
// not block each other. synchronous stays FULL: a fence counter must not
// go back after a power loss.
func sqliteDSN(path string, busyTimeout time.Duration) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path)}
	ms := busyTimeout.Milliseconds()
	return "file:" + u.EscapedPath() + "?_pragma=busy_timeout(" + strconv.FormatInt(ms, 10) + ")&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
}
