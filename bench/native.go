package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/stdlib"
)

// The databases' own locks, which golocker's SQL driver is compared with
// on PostgreSQL and MySQL/MariaDB: what an application that needs one lock
// and owns a connection for it would call. Each handle has a connection of
// its own for all its life (as separate replicas would), opened with the
// database/sql driver mysqllock uses (pgx's stdlib, go-sql-driver/mysql).
const (
	PGAdvisory   = "pg-advisory"   // pg_advisory_lock / pg_advisory_unlock
	MySQLGetLock = "mysql-getlock" // GET_LOCK / RELEASE_LOCK
)

// NativeLocks are the libraries that are a database's own lock.
var NativeLocks = []string{PGAdvisory, MySQLGetLock}

// nativeTimeout bounds the statements of a native handle other than the
// wait for the lock: opening, releasing, cancelling.
const nativeTimeout = 10 * time.Second

// openNative returns n handles that open makes, each on a connection of
// its own; the Set closes them.
func openNative(n int, open func(s *Set) (Handle, error)) (*Set, error) {
	s := &Set{}
	for range n {
		h, err := open(s)
		if err != nil {
			_ = s.Close()
			return nil, err
		}
		s.Handles = append(s.Handles, h)
	}
	return s, nil
}

// pinnedConn opens db's only connection and adds closing it, then db, to
// s. A session lock belongs to a connection, so a handle runs Lock and
// Unlock on the same one; a *sql.Conn fails once its connection breaks
// rather than moving silently to a new session.
func pinnedConn(ctx context.Context, db *sql.DB, s *Set) (*sql.Conn, error) {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	s.closers = append(s.closers, db.Close)
	cctx, cancel := context.WithTimeout(ctx, nativeTimeout)
	defer cancel()
	conn, err := db.Conn(cctx)
	if err != nil {
		return nil, err
	}
	if err := conn.PingContext(cctx); err != nil {
		conn.Close()
		return nil, err
	}
	s.closers = append(s.closers, conn.Close)
	return conn, nil
}

// PGAdvisoryKey is the 64-bit key of pg_advisory_lock that the benchmark
// derives from a lock name: FNV-1a of the name.
func PGAdvisoryKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}

// openPGAdvisory opens one connection to the PostgreSQL URL target for a
// handle that locks with SELECT pg_advisory_lock(key) and unlocks with
// SELECT pg_advisory_unlock(key), key = PGAdvisoryKey(name). When the
// ctx of a waiting Lock ends, pgx asks the server to cancel the statement
// (a cancel request) and the connection stays usable; left to its default,
// pgx would close the connection, and the server would go on waiting for
// the lock on the abandoned session until it got it.
func openPGAdvisory(ctx context.Context, target, name string, n int, _ time.Duration) (*Set, error) {
	cfg, err := pgx.ParseConfig(target)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", PGAdvisory, err)
	}
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: nativeTimeout}
	}
	return openNative(n, func(s *Set) (Handle, error) {
		conn, err := pinnedConn(ctx, stdlib.OpenDB(*cfg), s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", PGAdvisory, err)
		}
		return &pgAdvisoryHandle{conn: conn, key: PGAdvisoryKey(name)}, nil
	})
}

type pgAdvisoryHandle struct {
	conn *sql.Conn
	key  int64
}

func (h *pgAdvisoryHandle) Lock(ctx context.Context) error {
	_, err := h.conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", h.key)
	if err == nil || ctx.Err() == nil {
		return err
	}
	// Cancelled. If the grant crossed the cancellation, the session holds
	// the lock though Lock failed: release whatever it holds (nothing
	// else, the key is the handle's only one).
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nativeTimeout)
	defer cancel()
	if _, uerr := h.conn.ExecContext(uctx, "SELECT pg_advisory_unlock_all()"); uerr != nil {
		return fmt.Errorf("%s: after a cancelled lock: %w", PGAdvisory, uerr)
	}
	return ctx.Err()
}

func (h *pgAdvisoryHandle) Unlock(ctx context.Context) error {
	var released bool
	if err := h.conn.QueryRowContext(ctx, "SELECT pg_advisory_unlock($1)", h.key).Scan(&released); err != nil {
		return err
	}
	if !released {
		return fmt.Errorf("%s: unlock: not held", PGAdvisory)
	}
	return nil
}

// MySQLLockName is the name GET_LOCK takes for a lock name: the name
// itself when it fits GET_LOCK's 64 characters, otherwise its start and a
// hash of the whole.
func MySQLLockName(name string) string {
	const limit = 64
	if len(name) <= limit {
		return name
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	sum := "#" + strconv.FormatUint(h.Sum64(), 16)
	return name[:limit-len(sum)] + sum
}

// mysqlConfig is the go-sql-driver/mysql configuration of a golocker
// mysql:// URL (mysql://user:password@host:port/database). Its statements
// carry their arguments in the text (InterpolateParams), as mysqllock's
// do: one round trip each, where a prepared statement would take two.
func mysqlConfig(target string) (*mysql.Config, error) {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "mysql" && u.Scheme != "mariadb") || u.Host == "" {
		return nil, errors.New("not a mysql://user:password@host:port/database URL") // url's errors quote the password
	}
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", u.Host
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	cfg.InterpolateParams = true
	return cfg, nil
}

// openMySQLGetLock opens one connection to the MySQL URL target for a
// handle that locks with SELECT GET_LOCK(name, timeout) and unlocks with
// SELECT RELEASE_LOCK(name); timeout is maxWait in whole seconds, at least
// a minute. go-sql-driver/mysql ends a statement whose ctx ends by
// closing the connection, which the server would not notice while it
// waits for the lock: the handle's statement runs without the ctx, and
// when the ctx ends a KILL QUERY on another connection (one per Set)
// interrupts the wait.
func openMySQLGetLock(ctx context.Context, target, name string, n int, maxWait time.Duration) (*Set, error) {
	cfg, err := mysqlConfig(target)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", MySQLGetLock, err)
	}
	open := func() (*sql.DB, error) {
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", MySQLGetLock, err)
		}
		return sql.OpenDB(c), nil
	}
	killer, err := open()
	if err != nil {
		return nil, err
	}
	s, err := openNative(n, func(s *Set) (Handle, error) {
		db, err := open()
		if err != nil {
			return nil, err
		}
		conn, err := pinnedConn(ctx, db, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", MySQLGetLock, err)
		}
		h := &getLockHandle{conn: conn, killer: killer, name: MySQLLockName(name),
			timeout: int64(max(maxWait, time.Minute).Seconds())}
		cctx, cancel := context.WithTimeout(ctx, nativeTimeout)
		defer cancel()
		if err := conn.QueryRowContext(cctx, "SELECT CONNECTION_ID()").Scan(&h.id); err != nil {
			return nil, fmt.Errorf("%s: %w", MySQLGetLock, err)
		}
		return h, nil
	})
	if err != nil {
		killer.Close()
		return nil, err
	}
	s.closers = append(s.closers, killer.Close)
	return s, nil
}

type getLockHandle struct {
	conn    *sql.Conn
	killer  *sql.DB // for KILL QUERY id
	id      int64   // the connection's CONNECTION_ID()
	name    string
	timeout int64 // seconds
}

func (h *getLockHandle) Lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	stop := make(chan struct{})
	killed := make(chan error, 1)
	go func() {
		select {
		case <-stop:
			killed <- nil
		case <-ctx.Done():
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nativeTimeout)
			_, err := h.killer.ExecContext(kctx, "KILL QUERY "+strconv.FormatInt(h.id, 10))
			cancel()
			killed <- err
		}
	}()
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(h.timeout)*time.Second+nativeTimeout)
	var got sql.NullInt64
	err := h.conn.QueryRowContext(qctx, "SELECT GET_LOCK(?, ?)", h.name, h.timeout).Scan(&got)
	cancel()
	close(stop)
	// Nothing else runs on the connection before the KILL, if any, is
	// done: it would interrupt the next statement instead.
	kerr := <-killed
	switch {
	case err == nil && got.Valid && got.Int64 == 1:
		return nil // held, even if ctx has just ended
	case ctx.Err() == nil:
		if err == nil {
			err = fmt.Errorf("GET_LOCK with a timeout of %d s returned %s", h.timeout, sqlInt(got))
		}
		return fmt.Errorf("%s: lock: %w", MySQLGetLock, err)
	}
	// Interrupted. If the grant crossed the KILL, the session holds the
	// lock though the statement failed: release whatever it holds. A KILL
	// that reached the session between statements does not carry over to
	// the next one (the server clears it when a statement starts).
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), nativeTimeout)
	defer ucancel()
	if _, uerr := h.conn.ExecContext(uctx, "SELECT RELEASE_ALL_LOCKS()"); uerr != nil {
		return fmt.Errorf("%s: after an interrupted lock: %w", MySQLGetLock, errors.Join(uerr, kerr))
	}
	return ctx.Err()
}

func (h *getLockHandle) Unlock(ctx context.Context) error {
	var released sql.NullInt64
	if err := h.conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", h.name).Scan(&released); err != nil {
		return err
	}
	if !released.Valid || released.Int64 != 1 {
		return fmt.Errorf("%s: unlock: RELEASE_LOCK returned %s", MySQLGetLock, sqlInt(released))
	}
	return nil
}

// sqlInt shows an integer result as SQL does.
func sqlInt(n sql.NullInt64) string {
	if !n.Valid {
		return "NULL"
	}
	return strconv.FormatInt(n.Int64, 10)
}
