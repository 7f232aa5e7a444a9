package mysqllock

import "errors"

// DefaultTable is the lock table's name unless WithTable says otherwise.
const DefaultTable = "golocker_locks"

// Option configures a Driver (New, Open).
type Option func(*options) error

type options struct {
	table       string
	createTable bool
	notify      bool
	notifySet   bool
}

func defaultOptions() options {
	return options{table: DefaultTable, createTable: true, notify: true}
}

func (o *options) apply(opts []Option) error {
	for _, f := range opts {
		if f == nil {
			continue
		}
		if err := f(o); err != nil {
			return err
		}
	}
	return nil
}

// errOption is wrapped by every invalid option value.
var errOption = errors.New("mysqllock: invalid option")

// WithTable sets the lock table (default DefaultTable, "golocker_locks"):
// a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most 63 characters),
// optionally qualified by a database (MySQL) or schema (PostgreSQL) as
// "schema.table". Anything else is an error: the name is never
// interpolated into SQL unchecked. URL parameter: table.
func WithTable(table string) Option {
	return func(o *options) error {
		// Quoting for MySQL accepts "schema.table"; the dialect's own
		// rule is checked again when the driver is built.
		if _, err := quoteTable(DialectMySQL, table); err != nil {
			return err
		}
		o.table = table
		return nil
	}
}

// WithCreateTable says whether the driver creates its table on first use
// with CREATE TABLE IF NOT EXISTS (default true). Teams that manage their
// schemas create it with the statement from DDL and turn this off, so
// that the driver needs no DDL privilege. URL parameter: create_table.
func WithCreateTable(create bool) Option {
	return func(o *options) error {
		o.createTable = create
		return nil
	}
}

// WithNotify says whether, on PostgreSQL, waiters are woken by
// LISTEN/NOTIFY (default true when the *gorm.DB uses the pgx driver, as
// gorm.io/driver/postgres does). Turn it off behind a pooler that cannot
// keep a session's LISTEN, such as PgBouncer in transaction mode: waiters
// then poll. Asking for it on another database is an error.
// URL parameter: notify.
func WithNotify(notify bool) Option {
	return func(o *options) error {
		o.notify = notify
		o.notifySet = true
		return nil
	}
}
