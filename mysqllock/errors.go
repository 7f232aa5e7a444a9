package mysqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"os"
	"strings"

	gosqlite "github.com/glebarez/go-sqlite"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
)

// Error codes the driver reacts to.
const (
	mysqlDupEntry      = 1062 // ER_DUP_ENTRY
	mysqlDataTooLong   = 1406 // ER_DATA_TOO_LONG
	mysqlLockWait      = 1205 // ER_LOCK_WAIT_TIMEOUT
	mysqlDeadlock      = 1213 // ER_LOCK_DEADLOCK
	mysqlNoSuchTable   = 1146 // ER_NO_SUCH_TABLE
	mysqlBadField      = 1054 // ER_BAD_FIELD_ERROR
	mysqlQueryKilled   = 1317 // ER_QUERY_INTERRUPTED
	mysqlConnKilled    = 1927 // ER_CONNECTION_KILLED (MariaDB)
	mysqlServerGone    = 2006 // CR_SERVER_GONE_ERROR
	sqliteBusy         = 5
	sqliteLocked       = 6
	sqliteConstraintPK = 1555 // SQLITE_CONSTRAINT_PRIMARYKEY
	sqliteConstraintUQ = 2067 // SQLITE_CONSTRAINT_UNIQUE
)

// dbError is one kind of error, as each database writes it.
type dbError struct {
	mysql  uint16                     // MySQL/MariaDB error number; 0: none
	pg     string                     // PostgreSQL SQLSTATE; "": none
	sqlite func(*gosqlite.Error) bool // nil: none
}

// in reports whether err is of kind e.
func (e dbError) in(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return e.mysql != 0 && me.Number == e.mysql
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return e.pg != "" && pe.Code == e.pg
	}
	var se *gosqlite.Error
	if errors.As(err, &se) {
		return e.sqlite != nil && e.sqlite(se)
	}
	return false
}

// sqliteSays matches a SQLite error whose message contains one of parts.
func sqliteSays(parts ...string) func(*gosqlite.Error) bool {
	return func(se *gosqlite.Error) bool {
		for _, p := range parts {
			if strings.Contains(se.Error(), p) {
				return true
			}
		}
		return false
	}
}

// The kinds of errors the driver reacts to.
var (
	duplicateKey = dbError{mysql: mysqlDupEntry, pg: "23505", sqlite: func(se *gosqlite.Error) bool {
		return se.Code() == sqliteConstraintPK || se.Code() == sqliteConstraintUQ
	}}
	// A statement the server cancelled (KILL QUERY, pg_cancel_backend).
	queryCancelled = dbError{mysql: mysqlQueryKilled, pg: "57014"} // query_canceled
	// A table created by hand with a narrower name column.
	tooLong       = dbError{mysql: mysqlDataTooLong, pg: "22001"}                                                     // string_data_right_truncation
	missingTable  = dbError{mysql: mysqlNoSuchTable, pg: "42P01", sqlite: sqliteSays("no such table")}                // undefined_table
	missingColumn = dbError{mysql: mysqlBadField, pg: "42703", sqlite: sqliteSays("no such column", "has no column")} // undefined_column
)

// isDuplicate reports whether err is a duplicate key error, whether or not
// the *gorm.DB translates errors (gorm.Config.TranslateError).
func isDuplicate(err error) bool {
	return errors.Is(err, gorm.ErrDuplicatedKey) || duplicateKey.in(err)
}

// isTooLong reports whether the database refused a value as too long for
// its column.
func isTooLong(err error) bool { return tooLong.in(err) }

// isMissingTable reports whether err says the lock table does not exist.
func isMissingTable(err error) bool { return missingTable.in(err) }

// isMissingColumn reports whether err says a column does not exist: a
// table created for an older version of the driver.
func isMissingColumn(err error) bool { return missingColumn.in(err) }

// retryable reports whether a statement that failed with err certainly
// had no effect and may be sent again at once: a deadlock or serialization
// failure (the database rolled the statement back), a lock wait that timed
// out, a busy SQLite file, or a connection that the server had closed
// before the statement ran (a killed session: the pool opens another).
func retryable(err error) bool {
	if errors.Is(err, driver.ErrBadConn) {
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case mysqlDeadlock, mysqlLockWait:
			return true
		}
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", // serialization_failure
			"40P01", // deadlock_detected
			"55P03", // lock_not_available
			"57P01", // admin_shutdown: pg_terminate_backend of an idle session
			"57P02", // crash_shutdown
			"57P03": // cannot_connect_now
			return true
		}
		return false
	}
	var se *gosqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteBusy, sqliteLocked:
			return true
		}
		return false
	}
	return pgconn.SafeToRetry(err)
}

// transient reports whether an idempotent statement (a read, a renewal)
// that failed with err may be sent again: it is retryable, or the
// connection failed without an answer from the database (a killed
// session, a reset) and the pool will use another.
func transient(err error) bool {
	return retryable(err) || (!definite(err) && !ctxErr(err))
}

// definite reports whether err is the database's own answer to a
// statement that it then rolled back, so that nothing can have been
// granted. Anything else (a cancelled ctx, a broken connection, a
// timeout) leaves the outcome unknown.
func definite(err error) bool {
	if ctxErr(err) {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case mysqlQueryKilled, mysqlConnKilled, mysqlServerGone:
			return false
		}
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return true
	}
	var se *gosqlite.Error
	return errors.As(err, &se) || errors.Is(err, gorm.ErrDuplicatedKey)
}

// ctxErr reports whether err comes from a ctx that ended, also as a
// socket's deadline (a dial under a ctx with a deadline).
// nothingDone reports whether a statement that failed with err certainly
// changed nothing: the database's own answer (definite), or a connection
// found broken before the statement was sent (driver.ErrBadConn, or a
// *sql.Conn already closed).
func nothingDone(err error) bool {
	return definite(err) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
}

func ctxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}
