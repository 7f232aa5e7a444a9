package mysqllock

import (
	"context"
	"net"

	"github.com/golocker/locker/internal/driverkit"
)

// DefaultTable is the lock table's name unless WithTable says otherwise.
const DefaultTable = "golocker_locks"

// Option configures a Driver (New, Open). An invalid value is an error
// that matches locker.ErrInvalidOption.
type Option func(*options) error

type options struct {
	table        string
	createTable  bool
	waitConns    int
	waitConnsSet bool
	sharedLease  bool
	dialer       driverkit.DialFunc
	// poolConns is the pool Open made for acquisitions, renewals and
	// releases (max_conns), beside the wait connections; 0 for New.
	poolConns int
}

func defaultOptions() options {
	return options{table: DefaultTable, createTable: true, waitConns: DefaultWaitConns}
}

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

// DefaultWaitConns is how many connections a Driver that Open made, or
// one on an unbounded pool, keeps for native waits (WithWaitConns).
const DefaultWaitConns = 16

// WithWaitConns bounds the connections a Driver uses for native waits on
// MySQL and PostgreSQL (gate.go): a Lock that waits, and then the hold it
// gets, keeps one connection of the pool, on which it waits in the
// database's own queue for the lock's gate (GET_LOCK, pg_advisory_lock)
// and which it lets go when the hold is released. With n such holds and
// waits in flight, a further Lock waits as TryLock's do, by attempts with
// back-off. 0 turns native waits off: use it behind a pooler that cannot
// keep a session's locks, such as PgBouncer in transaction mode.
//
// Open (URL parameter wait_conns, default DefaultWaitConns) makes its pool
// max_conns + n connections, so that waits never take the connections of
// acquisitions and renewals. With New, the default is a quarter of the
// pool's SetMaxOpenConns (DefaultWaitConns on an unbounded pool), taken
// out of what acquisitions may use; the pool must leave acquisitions at
// least two. It is an error on SQLite, which has no lock to wait on.
func WithWaitConns(n int) Option {
	return func(o *options) error {
		if n < 0 {
			return driverkit.BadOption("mysqllock", "wait_conns %d: want 0 or more", n)
		}
		o.waitConns = n
		o.waitConnsSet = true
		return nil
	}
}

// WithSharedLease says whether the Driver's holds share one lease per
// lease length (default false): a row in the table of shared leases that
// the watchdog renews with one statement, however many holds it keeps,
// instead of a statement per thousand holds. A Client that holds very
// many locks at once (a million) needs it: the database then writes a
// row per renewal, not a row per hold. Every process that uses the table
// must run a version of the driver that knows shared leases (any that
// creates the table of shared leases): an earlier version takes a hold
// whose own lease ran out although its shared lease has not (D28). URL
// parameter: shared_lease.
func WithSharedLease(shared bool) Option {
	return func(o *options) error {
		o.sharedLease = shared
		return nil
	}
}

// WithDialer makes Open connect to MySQL or PostgreSQL through dial (a
// proxy, a tunnel, or conformance.FaultNet in tests) instead of a plain
// TCP dial. It is an error with
// SQLite, which has no network, and with New, whose *gorm.DB is already
// connected.
func WithDialer(dial func(ctx context.Context, network, address string) (net.Conn, error)) Option {
	return func(o *options) error {
		if dial == nil {
			return driverkit.BadOption("mysqllock", "WithDialer(nil)")
		}
		o.dialer = dial
		return nil
	}
}

// poolConns tells newDriver the part of the pool that Open made for
// acquisitions, renewals and releases.
func poolConns(n int) Option {
	return func(o *options) error {
		o.poolConns = n
		return nil
	}
}
