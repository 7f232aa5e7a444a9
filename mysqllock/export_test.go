package mysqllock

import (
	"context"
	"database/sql"
)

// GateFree reports whether the gate of name (gate.go) is free: no session
// of the database holds it. It takes and lets go the gate on a connection
// of its own.
func GateFree(ctx context.Context, d *Driver, name string) (bool, error) {
	conn, err := d.sqlDB.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	key := gateKey(d.dialect, d.table, name)
	if d.dialect == DialectMySQL {
		var free sql.NullInt64
		err := conn.QueryRowContext(ctx, "SELECT IS_FREE_LOCK(?)", key).Scan(&free)
		return free.Int64 == 1, err
	}
	var got bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&got); err != nil || !got {
		return false, err
	}
	_, err = conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", key)
	return true, err
}
