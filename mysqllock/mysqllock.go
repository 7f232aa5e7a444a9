package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// MaxNameLen is the longest lock name the driver stores, in bytes: the size
// of the name column (VARBINARY(512) on MySQL, VARCHAR(512) on PostgreSQL,
// whose 512 characters hold at least 512 bytes). It equals
// backend.MaxNameLen, so every name package locker accepts fits. A table
// created by hand with a narrower column makes longer names fail with
// backend.ErrInvalidName.
const MaxNameLen = 512

// maxOwnerLen is the size of the owner column, in bytes.
const maxOwnerLen = 255

const (
	// maxAttempts bounds how often one statement is sent again after a
	// deadlock, a serialization failure, a busy SQLite file or a
	// connection the server had closed.
	maxAttempts = 5
	// cleanupTimeout bounds the release of a grant that may have happened
	// while Acquire failed (its ctx ended after the statement was sent).
	cleanupTimeout = 2 * time.Second
)

// Driver is a lock table in a SQL database, reached through GORM. It
// implements backend.Driver, backend.Waiter (the database's own lock as the
// queue on MySQL and PostgreSQL: gate.go), backend.Inspector,
// backend.BatchRenewer and backend.LogSetter, and is safe for concurrent
// use.
type Driver struct {
	db       *gorm.DB // a new session on the user's or our own *gorm.DB
	quietDB  *gorm.DB // db whose logger does not report expected errors
	sqlDB    *sql.DB  // closed by Close when owned
	owned    bool
	dialect  string
	table    string // as configured, unquoted
	leases   string // the table of shared leases, unquoted
	st       statements
	create   bool
	gates    *gates // the native wait (gate.go); nil on SQLite or without wait connections
	pipe     *pipe  // PostgreSQL: the gate's wait and the acquire statement in one round trip
	caps     backend.Capabilities
	log      *logSink        // the SetLogger logger, also the MySQL connector's
	table1st driverkit.Setup // creates the table on first use
	slots    chan struct{}   // bounds the acquisitions in flight (slots.go); nil: unbounded
	shared   *sharedLeases   // the Driver's shared leases (shared.go); nil: a lease per hold
	life     *driverkit.Life // open or closed; the background clean-ups
}

var (
	_ backend.Driver       = (*Driver)(nil)
	_ backend.Inspector    = (*Driver)(nil)
	_ backend.BatchRenewer = (*Driver)(nil)
	_ backend.Waiter       = (*Driver)(nil)
	_ backend.LogSetter    = (*Driver)(nil)
	_ backend.Dequeuer     = (*Driver)(nil)
)

// New returns a Driver on db, a *gorm.DB the caller already has: MySQL or
// MariaDB (gorm.io/driver/mysql), PostgreSQL (gorm.io/driver/postgres) or
// SQLite (github.com/glebarez/sqlite). The Driver's Close does not close db.
// db must not be inside a transaction: each lock operation is a statement
// of its own that must commit at once.
func New(db *gorm.DB, opts ...Option) (*Driver, error) {
	return newDriver(db, false, nil, opts)
}

func newDriver(db *gorm.DB, owned bool, log *logSink, opts []Option) (*Driver, error) {
	if db == nil || db.Dialector == nil {
		return nil, driverkit.BadOption("mysqllock", "nil *gorm.DB")
	}
	o := defaultOptions()
	if err := driverkit.Apply(&o, opts); err != nil {
		return nil, err
	}
	if o.dialer != nil && !owned {
		return nil, driverkit.BadOption("mysqllock", "WithDialer applies to Open: New's *gorm.DB is connected already")
	}
	dialect := db.Dialector.Name()
	switch dialect {
	case DialectMySQL, DialectPostgres, DialectSQLite:
	default:
		return nil, driverkit.BadOption("mysqllock", "unsupported GORM dialect %q (want mysql, postgres or sqlite)", dialect)
	}
	if _, inTx := db.Statement.ConnPool.(interface{ Commit() error }); inTx {
		return nil, driverkit.BadOption("mysqllock", "the *gorm.DB is inside a transaction; pass the database itself")
	}
	quoted, err := quoteTable(dialect, o.table)
	if err != nil {
		return nil, err
	}
	quotedLeases, err := quoteTable(dialect, leasesTable(o.table))
	if err != nil {
		return nil, err
	}
	quotedWeighted, err := quoteTable(dialect, weightedTable(o.table))
	if err != nil {
		return nil, err
	}
	st, err := loadStatements(dialect, quoted, quotedLeases, quotedWeighted)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = newLogSink()
	}
	sqlDB, _ := db.DB() // nil for exotic ConnPools; only notify and Close use it
	d := &Driver{
		db:      db.Session(&gorm.Session{NewDB: true}),
		sqlDB:   sqlDB,
		owned:   owned,
		dialect: dialect,
		table:   o.table,
		leases:  leasesTable(o.table),
		st:      st,
		create:  o.createTable,
		log:     log,
		life:    driverkit.NewLife(),
	}
	d.quietDB = d.db.Session(&gorm.Session{Logger: quietExpected{d.db.Logger}})
	waitConns, rest, err := connBudget(sqlDB, o)
	if err != nil {
		return nil, err
	}
	if dialect == DialectSQLite {
		waitConns = 0
	}
	d.slots = acquisitionSlots(rest)
	if o.sharedLease {
		d.shared = newSharedLeases()
	}
	if dialect == DialectSQLite && o.waitConnsSet && o.waitConns > 0 {
		return nil, driverkit.BadOption("mysqllock", "wait_conns applies to MySQL and PostgreSQL: SQLite has no lock to wait on")
	}
	if waitConns > 0 {
		d.gates = newGates(d, waitConns)
		if dialect == DialectPostgres {
			d.pipe = newPipe(st)
		}
	}
	d.caps = backend.Capabilities{
		Fencing:      true,
		Notify:       d.gates != nil,
		Expiry:       true,
		CrossProcess: true,
		Weighted:     true,
	}
	return d, nil
}

// Capabilities implements backend.Driver: Fencing, Expiry, CrossProcess,
// Weighted (weighted.go), and Notify on MySQL and PostgreSQL with wait
// connections (gate.go).
func (d *Driver) Capabilities() backend.Capabilities { return d.caps }

// Dialect returns the database's dialect: DialectMySQL, DialectPostgres or
// DialectSQLite.
func (d *Driver) Dialect() string { return d.dialect }

// Table returns the lock table's name, as configured.
func (d *Driver) Table() string { return d.table }

// SetLogger implements backend.LogSetter: the database client's messages
// (go-sql-driver/mysql's, for a Driver from Open) go to l. A Driver from
// New leaves the *gorm.DB's logger as it is.
func (d *Driver) SetLogger(l *slog.Logger) { d.log.set(l) }

// Close stops the Driver's background clean-ups, and closes the
// connection pool if the Driver opened it (Open); a *gorm.DB given to New
// stays open. Holds stay in the table until released or expired.
func (d *Driver) Close() error {
	return d.life.Close(func() error {
		if d.owned && d.sqlDB != nil {
			return d.sqlDB.Close()
		}
		return nil
	})
}

// ready checks that the Driver is open and, on first use, creates the
// table.
func (d *Driver) ready(ctx context.Context) error {
	if err := d.life.Err(); err != nil || !d.create {
		return err
	}
	err := d.table1st.Run(ctx, d.life, d.createTable)
	if cerr := ended(ctx); err != nil && cerr != nil {
		// The first use of a Driver with a short wait: the wait ran out.
		return fmt.Errorf("%w (%w)", cerr, err)
	}
	return err
}

// ended returns ctx's error, or DeadlineExceeded when ctx's deadline has
// passed although ctx has not yet been marked done: a socket's deadline,
// set from ctx's, can fire before ctx's own timer.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// createTable is ready's set-up: the lock table, its column lease_id if
// an earlier version made it, the table of shared leases and the table of
// weighted holds.
func (d *Driver) createTable(ctx context.Context) error {
	if err := d.ensure(ctx, d.st.probeTable, d.st.create, isMissingTable); err != nil {
		return fmt.Errorf("mysqllock: creating table %s: %w", d.table, err)
	}
	if err := d.ensure(ctx, d.st.probeColumn, d.st.addLeaseColumn, isMissingColumn); err != nil {
		return fmt.Errorf("mysqllock: adding column lease_id to table %s: %w", d.table, err)
	}
	if err := d.ensure(ctx, d.st.probeLeases, d.st.createLeases, isMissingTable); err != nil {
		return fmt.Errorf("mysqllock: creating table %s: %w", d.leases, err)
	}
	if err := d.ensure(ctx, d.st.w.probe, d.st.w.create, isMissingTable); err != nil {
		return fmt.Errorf("mysqllock: creating table %s: %w", weightedTable(d.table), err)
	}
	return nil
}

// ensure runs create when probe fails with an error that missing
// recognizes. Look first: a table that exists needs no CREATE, nor the
// privilege to run one. Concurrent CREATE TABLE IF NOT EXISTS can fail on
// PostgreSQL (a unique violation in its catalog), and concurrent ADD
// COLUMN on every database: the table or column then exists, and the next
// look sees it. quietDB keeps these expected errors out of the
// application's GORM log.
func (d *Driver) ensure(ctx context.Context, probe, create string, missing func(error) bool) error {
	var err error
	for range 3 {
		err = d.retryIdempotent(ctx, func() error { return d.quietDB.WithContext(ctx).Exec(probe).Error })
		if err == nil || !missing(err) {
			break
		}
		err = d.retry(ctx, func() error { return d.quietDB.WithContext(ctx).Exec(create).Error })
		if err == nil || ctx.Err() != nil {
			break
		}
		driverkit.Sleep(ctx, 20*time.Millisecond)
	}
	return err
}

func (d *Driver) quotedTable() string {
	q, _ := quoteTable(d.dialect, d.table) // validated in newDriver
	return q
}

func checkRequest(r backend.Request) error {
	if err := backend.CheckName(r.Name); err != nil {
		return err
	}
	if r.Owner == "" || len(r.Owner) > maxOwnerLen {
		return fmt.Errorf("mysqllock: owner of %d bytes: want 1 to %d", len(r.Owner), maxOwnerLen)
	}
	if r.TTL <= 0 {
		return backend.ErrInvalidTTL
	}
	return nil
}

// leaseMicros is the lease passed to SQL: whole milliseconds, rounded up,
// in microseconds.
func leaseMicros(ttl time.Duration) int64 {
	ms := (ttl + time.Millisecond - 1) / time.Millisecond
	return int64(max(ms, 1)) * 1000
}

// args are a statement's named parameters.
type args = map[string]any

// exec runs a statement that changes rows and returns its result.
func (d *Driver) exec(ctx context.Context, db *gorm.DB, q string, a args) (sql.Result, int64, error) {
	res := gorm.WithResult()
	tx := db.WithContext(ctx).Clauses(res).Exec(q, a)
	if tx.Error != nil {
		return nil, 0, tx.Error
	}
	return res.Result, tx.RowsAffected, nil
}

// query runs q on db (the pool, or a gate's connection) and calls scan
// for each row.
func (d *Driver) query(ctx context.Context, db *gorm.DB, q string, a args, scan func(*sql.Rows) error) error {
	rows, err := db.WithContext(ctx).Raw(q, a).Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

// quiet returns db with a logger that leaves out the errors the driver
// expects (quietExpected).
func (d *Driver) quiet(db *gorm.DB) *gorm.DB {
	if db == d.db {
		return d.quietDB
	}
	return db.Session(&gorm.Session{Logger: quietExpected{db.Logger}})
}

// retry runs f again, a bounded number of times, while it fails with an
// error after which the database certainly did nothing (see retryable).
func (d *Driver) retry(ctx context.Context, f func() error) error {
	return d.retryIf(ctx, retryable, f)
}

// retryIdempotent is retry for statements that may run twice: reads and
// renewals are also sent again after a connection failed (see transient).
func (d *Driver) retryIdempotent(ctx context.Context, f func() error) error {
	return d.retryIf(ctx, transient, f)
}

func (d *Driver) retryIf(ctx context.Context, again func(error) bool, f func() error) error {
	wait := time.Millisecond
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || attempt == maxAttempts || !again(err) || ctx.Err() != nil {
			return err
		}
		driverkit.Sleep(ctx, wait/2+rand.N(wait/2+1))
		wait *= 4
	}
}

// quietExpected is the *gorm.DB's own logger, minus the errors the driver
// expects and handles: the duplicate key of the MySQL dialect when two
// owners create the row of a new name at once, and the missing table or
// catalog conflict of the first use. The statement is still logged, as a
// success.
type quietExpected struct{ logger.Interface }

func (q quietExpected) LogMode(l logger.LogLevel) logger.Interface {
	return quietExpected{q.Interface.LogMode(l)}
}

func (q quietExpected) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	if err != nil && (isDuplicate(err) || isMissingTable(err)) {
		err = nil
	}
	q.Interface.Trace(ctx, begin, fc, err)
}

// explain adds a hint to an error caused by a missing table or column.
func (d *Driver) explain(err error) error {
	switch {
	case isMissingTable(err) && !d.create:
		table := d.table
		if strings.Contains(err.Error(), leasesTable(unqualified(d.table))) {
			table = d.leases
		}
		return fmt.Errorf("mysqllock: table %s does not exist: create it (see DDL) or use create_table=true: %w", table, err)
	case isMissingColumn(err):
		return fmt.Errorf("mysqllock: table %s lacks a column of this version (see DDL): %w", d.table, err)
	}
	return err
}

// unqualified is table without its schema.
func unqualified(table string) string {
	_, name, ok := strings.Cut(table, ".")
	if !ok {
		return table
	}
	return name
}

// logSink holds the logger that SetLogger gives, for the Driver and for
// the MySQL connector's Logger (which exists before SetLogger is called).
type logSink struct{ p atomic.Pointer[slog.Logger] }

func newLogSink() *logSink {
	s := &logSink{}
	s.set(nil)
	return s
}

func (s *logSink) set(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	s.p.Store(l)
}

// Print implements go-sql-driver/mysql's Logger.
func (s *logSink) Print(v ...any) {
	s.p.Load().Warn("mysqllock: mysql driver: " + fmt.Sprint(v...))
}
