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
//	max_conns=16             connections for acquisitions, renewals and releases (not for SQLite: 1 per process)
//	wait_conns=16            mysql, postgres: connections for native waits, beside max_conns; 0: none (WithWaitConns)
//	busy_timeout=5s          sqlite: how long a statement waits for another process's write
//	shared_lease=false       the holds share one renewed lease per lease length (WithSharedLease)
//
// and the database driver's own, passed on: for mysql tls (true, false,
// skip-verify, preferred), timeout, read_timeout, write_timeout,
// allow_native_passwords, allow_cleartext_passwords; for postgres sslmode,
// sslrootcert, sslcert, sslkey, sslpassword, sslsni, connect_timeout,
// application_name, target_session_attrs. Open connects through the
// dial function of WithDialer when one is given, returns when its ctx
// ends (within DefaultOpenTimeout, 5s, when ctx has no deadline), and its
// errors name the address tried and the cause (connection refused, unknown
// host, TLS the server does not speak, authentication failed) but never
// the password.
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
//	lease_id    BIGINT: the hold's shared lease, NULL when none (see Shared leases)
//	renew_stamp BINARY(16), MySQL only: the last batch renewal of the row
//
// The driver runs CREATE TABLE IF NOT EXISTS on first use unless the table
// exists. Teams that manage their schemas create it with the statement DDL
// returns and open with create_table=false; a table with a narrower name
// column makes longer names fail with backend.ErrInvalidName. A table
// created by an earlier version may have more columns (tickets, serving,
// serving_at): they are left alone. Names are at most MaxNameLen (512) bytes, which every name package
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
// PostgreSQL and SQLite an INSERT … ON CONFLICT DO UPDATE … WHERE (free)
// … RETURNING (PostgreSQL's also returns the holder when the lock is not
// free; SQLite and MySQL read it with a second statement); on MySQL an
// UPDATE of the existing row
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
// # Waiting
//
// On MySQL and PostgreSQL the database's own lock is the queue. Each lock
// name has a gate: a user lock (GET_LOCK) or a session advisory lock
// (pg_advisory_lock) keyed by the table and the name. A Lock that waits
// (backend.Waiter) takes one of the Driver's wait connections, takes the
// gate (at once if it is free, else waiting in the database's queue, in
// order), and then makes the acquiring statement on the row, which stays
// the truth of the hold, its lease and its token. Its hold keeps the gate
// and the connection; the release frees the row and lets the gate go —
// one statement on PostgreSQL, two on MySQL — so the database wakes the
// next waiter at once, and it takes the row. A waiting Client uses one
// connection per name it waits for or holds through Lock, at most
// wait_conns (default 16) of them, beside max_conns; beyond that, and with
// wait_conns=0 (PgBouncer in transaction mode, which cannot keep a
// session's locks), a Lock waits as on SQLite. A hold taken without the
// gate (TryLock's) wakes nobody: the gate's holder looks again at once
// while the lock changes hands, and never later than the holder's lease
// ends. A waiter blocked behind a process that stalled while holding the
// gate takes the lock when the stalled holder's lease ran out, or when the
// lock stays free for 250 ms.
//
// On SQLite, and for a Lock without a wait connection, package locker
// waits: it makes attempts with back-off, never past the holder's lease,
// sooner while the lock changes hands.
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
// # Semaphores, read-write locks and elections
//
// The weighted kinds (backend.Capabilities.Weighted) keep their holds in
// the table <table>_weighted (DDL returns it too), keyed by kind, name and
// owner: a head row per name with its limit and a counter that numbers
// tokens and places, a row per hold, and a row per place of a waiter.
// Each attempt is one transaction that locks the head row, deletes the
// holds and places that ran out on the database's clock, reads the name's
// rows and grants the request when no place is ahead of the owner's and
// its weight fits (the rule of backend.Kind), or keeps the waiter's place.
// Renewal, release, downgrade and proclaim are one owner-checked statement
// each. Weighted waits poll, in the order of their places; the head row
// stays, and keeps the counter, when the name's holds end (D39 in
// docs/decisions.md).
//
// # Capabilities
//
//   - Fencing: the fence column, strictly increasing per name.
//   - Expiry: a lease that is not renewed ends on the database's clock.
//   - CrossProcess.
//   - Notify on MySQL and PostgreSQL, unless wait_conns=0: the database
//     wakes the next waiter.
//   - Not FIFO as the suite means it: waiters are served in the database's
//     order while they have wait connections, and the suite cannot count
//     them in the store on every database.
//   - Not LostSignal: the database does not tell a holder that its row
//     changed; the next renewal (at TTL/3) does.
//   - Not SessionLease: leases are renewed by package locker.
//   - Weighted: semaphores, read-write locks and elections, above.
//
// The Driver also implements backend.Inspector (Holds lists rows with an
// owner and a running lease, of every kind; ForceRelease frees a Mutex),
// backend.Dequeuer, backend.BatchRenewer,
// backend.Watcher and backend.LogSetter: go-sql-driver/mysql's messages
// (such as "closing bad idle connection") go to the Client's logger, GORM's
// logger of a Driver from Open is silent, and nothing is written to stderr.
package mysqllock
