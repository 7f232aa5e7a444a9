// Package mysqllock is the SQL driver of package locker: locks in a table
// of the database a team already runs — MySQL or MariaDB, PostgreSQL, or
// SQLite — reached through GORM.
//
// Most code opens it by URL and uses package locker:
//
//	import _ "github.com/golocker/locker/mysqllock"
//
//	c, err := locker.Open(ctx, "postgres://app:secret@db.internal:5432/app?sslmode=require")
//
// or builds it from the *gorm.DB it already has, which Close leaves open:
//
//	d, err := mysqllock.New(gdb) // gorm.io/driver/mysql, gorm.io/driver/postgres or github.com/glebarez/sqlite
//	c, err := locker.New(d)
//
// Package locker does reentrancy, renewal (the watchdog), the lost-hold
// signal and error wrapping; this package does the SQL side only.
//
// # URLs
//
//	mysql://[user[:password]@]host[:3306]/database[?params]                          (also mariadb://)
//	postgres://[user[:password]@]host[:5432][,host2[:5432]…]/[database][?params]   (also postgresql://)
//	sqlite:///absolute/path/to/locks.db[?params]
//
// The SQLite path must be absolute (three slashes; sqlite://localhost/path
// is the same): a relative path would name different files for processes
// started in different directories, which would then not exclude each
// other, so sqlite://relative/path and sqlite:file.db are errors. Missing
// parent directories are created (mode 0755 less the umask); the file is
// created by SQLite. Percent-encode spaces, '?' and '#' in the path.
//
// Query parameters, all optional; an unknown one is an error:
//
//	table=golocker_locks     the lock table (WithTable); SCHEMA.TABLE on MySQL and PostgreSQL
//	create_table=true        create the table on first use (WithCreateTable)
//	max_conns=16             connection pool size (not for SQLite: 1 per process)
//	notify=true              postgres: wake the waiter whose turn it is with LISTEN/NOTIFY (WithNotify)
//	busy_timeout=5s          sqlite: how long a statement waits for another process's write
//	shared_lease=false       the holds share one renewed lease per lease length (WithSharedLease)
//
// and the database driver's own, passed on: for mysql tls (true, false,
// skip-verify, preferred), timeout, read_timeout, write_timeout,
// allow_native_passwords, allow_cleartext_passwords; for postgres sslmode,
// sslrootcert, sslcert, sslkey, sslpassword, sslsni, connect_timeout,
// application_name, target_session_attrs. Open connects through the
// dial function of WithDialer when one is given, returns when its ctx
// ends, and its errors name the address tried but never the password.
// Unix sockets and other settings: open the *gorm.DB yourself and use New.
//
// # Schema
//
// One row per lock name, never deleted, so that its fencing counter
// survives releases:
//
//	name        VARBINARY(512) (MySQL; compared byte for byte, case and trailing
//	            spaces included), VARCHAR(512) COLLATE "C" (PostgreSQL), TEXT (SQLite)
//	owner       the holder's owner string, NULL when free
//	fence       BIGINT: incremented by every grant, the fencing token
//	expires_at  DATETIME(3) in UTC (MySQL), TIMESTAMPTZ (PostgreSQL),
//	            Unix milliseconds (SQLite): the end of the lease on the database's
//	            clock, or the time of the release
//	tickets     BIGINT: the last ticket of the lock's queue (see Waiting)
//	serving     BIGINT: the ticket whose turn it is
//	serving_at  when the turn moved to it
//	renew_stamp BINARY(16), MySQL only: the last batch renewal of the row
//
// The driver runs CREATE TABLE IF NOT EXISTS on first use unless the table
// exists. Teams that manage their schemas create it with the statement DDL
// returns and open with create_table=false; a table with a narrower name
// column makes longer names fail with backend.ErrInvalidName. A table
// created by an earlier version lacks the queue columns: add them as DDL
// shows. Names are at most MaxNameLen (512) bytes, which every name package
// locker accepts fits. The table name is validated as an identifier and
// quoted; names, owners and leases are always bound parameters. The SQL is
// in sql/: common.sql holds the statements that dialects share, and each
// dialect's file (mysql.sql, postgres.sql, sqlite.sql) its own fragments
// and the statements it writes otherwise.
//
// # How a lock works
//
// Every time is the database's (UTC_TIMESTAMP(3), statement_timestamp(),
// SQLite's 'now'): no client time is ever sent, so client clocks and
// session time zones do not matter. Acquiring is one atomic statement: on
// PostgreSQL and SQLite an INSERT … ON CONFLICT DO UPDATE … WHERE
// (granted) … RETURNING; on MySQL an UPDATE of the existing row
// (LAST_INSERT_ID(fence + 1) returns the token in the same reply) and, for
// a name without a row, an INSERT whose duplicate key error means another
// owner created it first — it never reaches the caller nor, as an error,
// the *gorm.DB's logger. Renewal and release are one owner-checked UPDATE
// each; release sets owner to NULL and keeps the row and its fence. The
// watchdog renews many leases at once (backend.BatchRenewer): one UPDATE
// per 1000 leases of one length, each row owner-checked, the renewed rows
// read back with RETURNING (PostgreSQL, SQLite) or by the batch's random
// stamp (MySQL, one more statement); a lease that was lost does not fail
// the others. Deadlocks, serialization failures, a busy SQLite file and
// sessions the server killed are retried a few times. If an acquisition
// fails after its statement may have run (a cancelled ctx, a broken
// connection), the driver releases by owner at once and again shortly
// after, so that an error never leaves a hold. With a bounded pool
// (max_conns, or SetMaxOpenConns before New), acquisitions use at most
// all but one of its connections at once: the last is left to renewals
// and releases, which a burst of waiting acquisitions would otherwise keep
// from a connection until their leases ran out.
//
// SQLite: every connection uses WAL, busy_timeout and synchronous=FULL (a
// fencing counter must not go back after a power loss), and a process
// keeps one connection, so that its statements queue in Go rather than
// poll the file lock. Processes on one machine exclude each other through
// the file; a network file system is not supported.
//
// # Waiting, in turn
//
// Package locker does the waiting: it calls Acquire again, with back-off,
// never past the holder's lease. Polling alone is not fair (an owner that
// releases and locks again takes the lock before the waiters that back
// off), so each lock's row is also a ticket queue, as at a bakery. A
// waiting Lock that does not get the lock takes the next ticket (tickets
// + 1); a free lock goes to the ticket whose turn it is (serving), and the
// grant passes the turn to the next ticket. A waiter with a ticket only
// reads the row (no row lock, no write) until its turn has come and the
// lock is free; the Driver remembers its waiters' tickets and sets
// HeldError.Left to when each should look again: the head after 1, 2,
// 4 … ms up to 50 ms, a waiter n turns behind after about n turns,
// measured from how fast the turns move. TryLock (a single attempt) takes
// a free lock whatever the queue, as java.util.concurrent's tryLock does
// even on a fair lock. A waiter that gave up leaves its ticket behind:
// once the lock has been free for 150 ms and the turn is older than that,
// a waiter with a later ticket takes the turn over, and those it skipped
// take new tickets. Every one of these decisions is in the acquiring
// statement, on the database's clock.
//
// On PostgreSQL, unless notify=false, a release also sends NOTIFY (in the
// releasing statement) with the ticket whose turn it now is, and each
// Driver keeps one extra connection, outside the pool, that LISTENs from
// its first wait until Close (backend.Watcher): the waiter whose turn has
// come is woken within milliseconds, the others are not woken at all.
// Every release reaches every listening Driver on the database. Behind a
// pooler that cannot keep a session's LISTEN (PgBouncer in transaction
// mode) use notify=false. docs/drivers/sql.md has measured numbers.
//
// # Shared leases
//
// With shared_lease=true (WithSharedLease) the holds of a Driver, from
// their first renewal, also name a lease of the Driver's, one per lease
// length, in the table <table>_leases, and the watchdog renews that one
// row instead of every hold's row: a Client can keep a million holds on a database that could
// not write a million rows every TTL/3. A hold lasts while its own lease
// or its shared lease has not run out; a shared lease that ran out is
// deleted by the next acquisition that finds it, after which its holds are
// free, and a renewal after that finds it gone. Every process on the
// table must run a version that knows shared leases (D28 in
// docs/decisions.md; docs/drivers/sql.md).
//
// # Capabilities
//
//   - Fencing: the fence column, strictly increasing per name.
//   - Expiry: a lease that is not renewed ends on the database's clock.
//   - CrossProcess.
//   - Notify on PostgreSQL with the pgx driver, unless notify=false.
//   - Not FIFO as the suite means it (waiters are served in ticket order,
//     but the store does not hand the lock over: the next one takes it).
//   - Not LostSignal: the database does not tell a holder that its row
//     changed; the next renewal (at TTL/3) does.
//   - Not SessionLease: leases are renewed by package locker.
//
// The Driver also implements backend.Inspector (Holds lists rows with an
// owner and a running lease; ForceRelease frees one), backend.BatchRenewer,
// backend.Watcher and backend.LogSetter: go-sql-driver/mysql's messages
// (such as "closing bad idle connection") go to the Client's logger, GORM's
// logger of a Driver from Open is silent, and nothing is written to stderr.
package mysqllock
