package mysqllock

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

// URL schemes of the driver.
const (
	SchemeMySQL      = "mysql"
	SchemePostgres   = "postgres"
	SchemePostgreSQL = "postgresql"
	SchemeSQLite     = "sqlite"
)

func init() {
	for _, s := range []string{SchemeMySQL, SchemePostgres, SchemePostgreSQL, SchemeSQLite} {
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

// Open opens the database that rawURL names (see the package doc for the
// forms) with its own connection pool, checks that it answers, and returns
// a Driver whose Close closes the pool. opts apply after the URL's
// parameters. A password never appears in an error.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Driver, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed URL", backend.ErrBadURL)
	}
	d, err := openURL(ctx, u, opts)
	if err != nil {
		return nil, scrub(err, u)
	}
	return d, nil
}

// target is what a URL says: how to reach the database, and the driver's
// options.
type target struct {
	dialect   string
	dialector gorm.Dialector
	maxConns  int
	opts      []Option

	sqlitePath  string        // the database file, for SQLite
	busyTimeout time.Duration // SQLite's busy_timeout
}

func openURL(ctx context.Context, u *url.URL, extra []Option) (*Driver, error) {
	t, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	if t.sqlitePath != "" {
		// A default path such as ~/.local/state/app/locks.db works on
		// first use.
		if err := os.MkdirAll(filepath.Dir(t.sqlitePath), 0o755); err != nil {
			return nil, fmt.Errorf("mysqllock: sqlite: %w", err)
		}
	}
	if t.sqlitePath == "" {
		return openOnce(ctx, t, extra)
	}
	// Switching a new SQLite file to WAL takes its exclusive lock, and a
	// process that meets another one doing it gets SQLITE_BUSY at once
	// (SQLite does not wait for that lock, whatever busy_timeout says).
	// Processes started together are normal, so opening retries a busy
	// file for as long as a statement would wait.
	deadline := time.Now().Add(t.busyTimeout)
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		d, err := openOnce(ctx, t, extra)
		if err == nil || !retryable(err) || time.Now().Add(pause).After(deadline) {
			return d, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("mysqllock: open %s: %w (after: %w)", t.dialect, ctx.Err(), err)
		case <-time.After(pause):
		}
	}
}

// openOnce opens the database of t and a Driver on it.
func openOnce(ctx context.Context, t *target, extra []Option) (*Driver, error) {
	gdb, err := gorm.Open(t.dialector, &gorm.Config{
		Logger:                 logger.Discard,
		DisableAutomaticPing:   true,
		SkipDefaultTransaction: true,
	})
	if err != nil {
		return nil, fmt.Errorf("mysqllock: open %s: %w", t.dialect, err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(t.maxConns)
	sqlDB.SetMaxIdleConns(t.maxConns)
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("mysqllock: connect to %s: %w", t.dialect, err)
	}
	d, err := newDriver(gdb, true, append(t.opts, extra...))
	if err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	return d, nil
}

// parseURL turns a URL into a GORM dialector and options. The query
// parameters that are not golocker's go to the database driver only when
// they are listed for it; anything else is an error.
func parseURL(u *url.URL) (*target, error) {
	if u.Fragment != "" {
		return nil, fmt.Errorf("%w: a fragment (#...) is not allowed", backend.ErrBadURL)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed query", backend.ErrBadURL)
	}
	t := &target{maxConns: defaultMaxConns}
	// golocker's own parameters, common to every dialect.
	driverParams := url.Values{}
	busyTimeout := defaultBusyTimeout
	for k, vs := range q {
		if len(vs) != 1 {
			return nil, fmt.Errorf("%w: parameter %q given %d times", backend.ErrBadURL, k, len(vs))
		}
		v := vs[0]
		switch k {
		case "table":
			t.opts = append(t.opts, WithTable(v))
		case "create_table":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("%w: create_table=%q: want true or false", backend.ErrBadURL, v)
			}
			t.opts = append(t.opts, WithCreateTable(b))
		case "notify":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("%w: notify=%q: want true or false", backend.ErrBadURL, v)
			}
			t.opts = append(t.opts, WithNotify(b))
		case "max_conns":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%w: max_conns=%q: want a positive integer", backend.ErrBadURL, v)
			}
			t.maxConns = n
		case "busy_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return nil, fmt.Errorf("%w: busy_timeout=%q: want a duration such as 5s", backend.ErrBadURL, v)
			}
			busyTimeout = d
			driverParams.Set(k, v) // only SQLite takes it; checked below
		default:
			driverParams.Set(k, v)
		}
	}
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case SchemeMySQL:
		err = t.mysql(u, driverParams)
	case SchemePostgres, SchemePostgreSQL:
		err = t.postgres(u, driverParams)
	case SchemeSQLite:
		err = t.sqlite(u, driverParams, busyTimeout)
	default:
		err = fmt.Errorf("%w: scheme %q is not mysql, postgres, postgresql or sqlite", backend.ErrBadURL, u.Scheme)
	}
	if err != nil {
		return nil, err
	}
	// Option errors (a bad table name) are URL errors here.
	o := defaultOptions()
	if err := o.apply(t.opts); err != nil {
		return nil, fmt.Errorf("%w: %v", backend.ErrBadURL, err)
	}
	if _, err := quoteTable(t.dialect, o.table); err != nil {
		return nil, fmt.Errorf("%w: %v", backend.ErrBadURL, err)
	}
	if o.notifySet && t.dialect != DialectPostgres {
		return nil, fmt.Errorf("%w: notify applies to postgres:// only", backend.ErrBadURL)
	}
	return t, nil
}

// unknownParam is the error for a query parameter no one takes.
func unknownParam(scheme string, p url.Values, allowed ...string) error {
	for k := range p {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return fmt.Errorf("%w: unknown parameter %q for %s:// (see the mysqllock package doc; the database driver's parameters allowed here: %s)",
				backend.ErrBadURL, k, scheme, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// mysqlParams are go-sql-driver/mysql settings a URL may give.
var mysqlParams = []string{"tls", "timeout", "read_timeout", "write_timeout", "allow_native_passwords", "allow_cleartext_passwords"}

func (t *target) mysql(u *url.URL, p url.Values) error {
	if err := unknownParam("mysql", p, mysqlParams...); err != nil {
		return err
	}
	if u.Opaque != "" || u.Host == "" {
		return fmt.Errorf("%w: want mysql://[user[:password]@]host[:3306]/database", backend.ErrBadURL)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return fmt.Errorf("%w: mysql:// needs a database: mysql://host:3306/DATABASE", backend.ErrBadURL)
	}
	cfg := mysql.NewConfig()
	cfg.Net = "tcp"
	port := u.Port()
	if port == "" {
		port = "3306"
	}
	cfg.Addr = net.JoinHostPort(u.Hostname(), port)
	cfg.DBName = db
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	// One round trip per statement instead of prepare, execute, close;
	// the driver escapes for the connection's character set.
	cfg.InterpolateParams = true
	for k, v := range p {
		var err error
		switch k {
		case "tls":
			switch v[0] {
			case "true", "false", "skip-verify", "preferred":
				cfg.TLSConfig = v[0]
			default:
				err = fmt.Errorf("want true, false, skip-verify or preferred")
			}
		case "timeout":
			cfg.Timeout, err = time.ParseDuration(v[0])
		case "read_timeout":
			cfg.ReadTimeout, err = time.ParseDuration(v[0])
		case "write_timeout":
			cfg.WriteTimeout, err = time.ParseDuration(v[0])
		case "allow_native_passwords":
			cfg.AllowNativePasswords, err = strconv.ParseBool(v[0])
		case "allow_cleartext_passwords":
			cfg.AllowCleartextPasswords, err = strconv.ParseBool(v[0])
		}
		if err != nil {
			return fmt.Errorf("%w: %s=%q: %v", backend.ErrBadURL, k, v[0], err)
		}
	}
	if cfg.TLSConfig != "" {
		// FormatDSN/ParseDSN resolve the named TLS configuration.
		parsed, err := mysql.ParseDSN(cfg.FormatDSN())
		if err != nil {
			return fmt.Errorf("%w: tls: %v", backend.ErrBadURL, err)
		}
		cfg = parsed
	}
	t.dialect = DialectMySQL
	t.dialector = gormmysql.New(gormmysql.Config{DSNConfig: cfg, DSN: cfg.FormatDSN(), SkipInitializeWithVersion: true})
	return nil
}

// postgresParams are libpq/pgx settings a URL may give.
var postgresParams = []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword", "sslsni",
	"connect_timeout", "application_name", "target_session_attrs"}

func (t *target) postgres(u *url.URL, p url.Values) error {
	if err := unknownParam("postgres", p, postgresParams...); err != nil {
		return err
	}
	if u.Opaque != "" || u.Host == "" {
		return fmt.Errorf("%w: want postgres://[user[:password]@]host[:5432][,host2[:5432]]/database", backend.ErrBadURL)
	}
	if strings.Contains(strings.TrimPrefix(u.Path, "/"), "/") {
		return fmt.Errorf("%w: postgres:// path must be /DATABASE", backend.ErrBadURL)
	}
	pu := url.URL{Scheme: "postgres", User: u.User, Host: u.Host, Path: u.Path, RawQuery: p.Encode()}
	t.dialect = DialectPostgres
	t.dialector = postgres.New(postgres.Config{DSN: pu.String()})
	return nil
}

var windowsDrive = regexp.MustCompile(`^/[A-Za-z]:/`)

func (t *target) sqlite(u *url.URL, p url.Values, busyTimeout time.Duration) error {
	if err := unknownParam("sqlite", p, "busy_timeout"); err != nil {
		return err
	}
	if u.User != nil {
		return fmt.Errorf("%w: sqlite:// takes no user or password", backend.ErrBadURL)
	}
	if u.Opaque != "" || (u.Host != "" && u.Host != "localhost") {
		return fmt.Errorf("%w: want sqlite:///absolute/path/to/file.db (three slashes); a relative path would differ between processes started in different directories", backend.ErrBadURL)
	}
	path := u.Path
	if runtime.GOOS == "windows" && windowsDrive.MatchString(path) {
		path = path[1:]
	}
	if path == "" || strings.HasSuffix(path, "/") || !filepath.IsAbs(path) {
		return fmt.Errorf("%w: sqlite:// needs the absolute path of a file: sqlite:///var/lib/app/locks.db", backend.ErrBadURL)
	}
	path = filepath.Clean(path)
	t.dialect = DialectSQLite
	t.sqlitePath = path
	t.busyTimeout = busyTimeout
	// One connection per process: statements queue in database/sql
	// instead of polling SQLite's file lock against each other; other
	// processes are kept in order by the lock and busy_timeout.
	t.maxConns = 1
	t.dialector = &sqlite.Dialector{DSN: sqliteDSN(path, busyTimeout), DriverName: "sqlite"}
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

// scrub hides u's password wherever it appears in err's message.
func scrub(err error, u *url.URL) error {
	if u.User == nil {
		return err
	}
	p, ok := u.User.Password()
	if !ok || p == "" || !strings.Contains(err.Error(), p) && !strings.Contains(err.Error(), url.QueryEscape(p)) {
		return err
	}
	return &scrubbed{err: err, secrets: []string{p, url.QueryEscape(p), url.PathEscape(p)}}
}

type scrubbed struct {
	err     error
	secrets []string
}

func (e *scrubbed) Error() string {
	s := e.err.Error()
	for _, p := range e.secrets {
		s = strings.ReplaceAll(s, p, "xxxxx")
	}
	return s
}

func (e *scrubbed) Unwrap() error { return e.err }
