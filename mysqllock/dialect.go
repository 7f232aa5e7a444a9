package mysqllock

import (
	"bufio"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"strings"

	"github.com/golocker/locker/internal/driverkit"
)

// Dialects, named as GORM's dialectors name themselves.
const (
	DialectMySQL    = "mysql"    // MySQL 5.7+ and MariaDB 10.3+
	DialectPostgres = "postgres" // PostgreSQL 11+
	DialectSQLite   = "sqlite"   // SQLite 3.35+ (github.com/glebarez/sqlite)
)

//go:embed sql/*.sql
var sqlFiles embed.FS

// statements are one dialect's SQL, with the table name and fragments
// filled in. Fields marked MySQL are empty on the other dialects.
type statements struct {
	create       string
	acquire      string // PostgreSQL, SQLite: the upsert; MySQL: the update of an existing row
	insert       string // MySQL: create the row held
	look         string
	renew        string
	renewCheck   string // MySQL
	renewBatch   string
	renewStamped string // MySQL
	release      string
	releaseGated string // release and gateUnlock in one statement
	releaseAny   string
	forceRelease string
	forceRevoke  string // SQLite: before forceRelease, in one transaction
	holds        string

	// The gates of the native wait (gate.go): MySQL and PostgreSQL.
	gateAcquire string
	gateHeld    string // MySQL
	gateWait    string
	gateCancel  string // PostgreSQL; MySQL's is built with the session's id
	gateUnlock  string

	// The shared leases (D28).
	probeTable     string
	probeColumn    string
	probeLeases    string
	addLeaseColumn string
	createLeases   string
	leaseCreate    string
	leaseRenew     string
	leaseRevoked   string // MySQL: the count after leaseRenew
	leaseKill      string
	leaseGC        string
	leaseCheck     string

	// The weighted kinds (weighted.go, sql/weighted.sql).
	w wstatements
}

// wstatements are the SQL of the weighted kinds.
type wstatements struct {
	create, probe, head, prune, rows, insert, grantPlace, keepPlace, setHead string
	renew, release, releaseAny, dequeue, downgrade, proclaim, holds          string
}

// loadStatements reads the embedded SQL of dialect, over the statements
// that dialects share (sql/common.sql and sql/weighted.sql: a dialect's
// statement of the same name replaces the shared one), and fills in the
// quoted names of the lock table, its table of shared leases and its table
// of weighted holds, and the fragments ({free}, {now}, ...).
func loadStatements(dialect, quotedTable, quotedLeases, quotedWeighted string) (statements, error) {
	b, err := sqlFiles.ReadFile("sql/" + dialect + ".sql")
	if err != nil || dialect == "common" || dialect == "weighted" {
		return statements{}, fmt.Errorf("mysqllock: no SQL for dialect %q", dialect)
	}
	named := make(map[string]string)
	for _, f := range []string{"common", "weighted"} {
		shared, err := sqlFiles.ReadFile("sql/" + f + ".sql")
		if err != nil {
			return statements{}, fmt.Errorf("mysqllock: the shared SQL: %w", err)
		}
		maps.Copy(named, parseNamed(string(shared)))
	}
	maps.Copy(named, parseNamed(string(b)))
	pairs := []string{"{table}", quotedTable, "{leases}", quotedLeases, "{weighted}", quotedWeighted}
	for k, v := range named {
		pairs = append(pairs, "{"+k+"}", v)
	}
	r := strings.NewReplacer(pairs...)
	fill := func(name string) string {
		s := named[name]
		// Fragments name fragments: fill until nothing changes.
		for range 10 {
			next := r.Replace(s)
			if next == s {
				break
			}
			s = next
		}
		return s
	}
	st := statements{
		create: fill("create"), acquire: fill("acquire"), insert: fill("insert"), look: fill("look"),
		renew: fill("renew"), renewCheck: fill("renew_check"), renewBatch: fill("renew_batch"),
		renewStamped: fill("renew_stamped"), release: fill("release"), releaseAny: fill("release_any"),
		forceRelease: fill("force_release"), holds: fill("holds"),
		probeTable: fill("probe_table"), probeColumn: fill("probe_column"), probeLeases: fill("probe_leases"), addLeaseColumn: fill("add_lease_column"),
		createLeases: fill("create_leases"), leaseCreate: fill("lease_create"), leaseRenew: fill("lease_renew"),
		leaseKill: fill("lease_kill"), leaseGC: fill("lease_gc"), leaseCheck: fill("lease_check"),
		w: wstatements{
			create: fill("w_create"), probe: fill("w_probe"), head: fill("w_head"), prune: fill("w_prune"), rows: fill("w_rows"),
			insert: fill("w_insert"), grantPlace: fill("w_grant_place"), keepPlace: fill("w_keep_place"), setHead: fill("w_set_head"),
			renew: fill("w_renew"), release: fill("w_release"), releaseAny: fill("w_release_any"), dequeue: fill("w_dequeue"),
			downgrade: fill("w_downgrade"), proclaim: fill("w_proclaim"), holds: fill("w_holds"),
		},
	}
	required := []string{st.create, st.acquire, st.look, st.renew, st.renewBatch, st.release, st.releaseAny, st.forceRelease, st.holds,
		st.probeTable, st.probeColumn, st.probeLeases, st.addLeaseColumn, st.createLeases, st.leaseCreate, st.leaseRenew, st.leaseKill, st.leaseGC, st.leaseCheck,
		st.w.create, st.w.probe, st.w.head, st.w.prune, st.w.rows, st.w.insert, st.w.grantPlace, st.w.keepPlace, st.w.setHead,
		st.w.renew, st.w.release, st.w.releaseAny, st.w.dequeue, st.w.downgrade, st.w.proclaim, st.w.holds}
	if dialect != DialectSQLite {
		st.gateAcquire, st.gateWait, st.gateUnlock = fill("gate_acquire"), fill("gate_wait"), fill("gate_unlock")
		required = append(required, st.gateAcquire, st.gateWait, st.gateUnlock)
	}
	if dialect != DialectSQLite {
		st.releaseGated = fill("release_gated")
		required = append(required, st.releaseGated)
	}
	switch dialect {
	case DialectPostgres:
		st.gateCancel = fill("gate_cancel")
		required = append(required, st.gateCancel)
	case DialectMySQL:
		st.leaseRevoked, st.gateHeld = fill("lease_revoked"), fill("gate_held")
		required = append(required, st.insert, st.renewCheck, st.renewStamped, st.leaseRevoked, st.gateHeld)
	case DialectSQLite:
		st.forceRevoke = fill("force_revoke")
		required = append(required, st.forceRevoke)
	}
	for _, s := range required {
		if s == "" || strings.Contains(s, "{") {
			return statements{}, fmt.Errorf("mysqllock: dialect %q: a statement is missing or not filled in", dialect)
		}
	}
	return st, nil
}

// parseNamed splits a SQL file into statements that each start after a
// "-- name: NAME" line. Other lines starting with "--" are comments and
// are dropped, so that no '?' in a comment is taken for a parameter.
func parseNamed(src string) map[string]string {
	out := make(map[string]string)
	var name string
	var body strings.Builder
	flush := func() {
		if name != "" {
			out[name] = strings.TrimSuffix(strings.TrimSpace(body.String()), ";")
		}
		body.Reset()
	}
	sc := bufio.NewScanner(strings.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if n, ok := strings.CutPrefix(trimmed, "-- name:"); ok {
			flush()
			name = strings.TrimSpace(n)
			continue
		}
		if strings.HasPrefix(trimmed, "--") || name == "" {
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	flush()
	return out
}

// identPart is one part of a table name: a plain SQL identifier, so that
// it needs no escaping on any dialect and is never interpolated unchecked.
var identPart = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// leasesTable is the name of the table of shared leases (D28) beside the
// lock table table: its name with "_leases" after it, in the same schema.
// A name that would then pass 63 characters (PostgreSQL's limit) keeps
// its first 40 and a digest of the whole.
func leasesTable(table string) string { return sideTable(table, "_leases") }

// weightedTable is the name of the table of weighted holds (weighted.go)
// beside the lock table table: its name with "_weighted" after it, made
// short enough as leasesTable's is.
func weightedTable(table string) string { return sideTable(table, "_weighted") }

// sideTable is the name of a table beside table: its name with suffix
// after it, in the same schema.
func sideTable(table, suffix string) string {
	schema, name, qualified := strings.Cut(table, ".")
	if !qualified {
		schema, name = "", table
	}
	if len(name)+len(suffix) > 63 {
		sum := sha256.Sum256([]byte(name))
		name = name[:40] + "_" + hex.EncodeToString(sum[:7])
	}
	if qualified {
		return schema + "." + name + suffix
	}
	return name + suffix
}

// quoteTable validates a table name ("locks", or "schema.locks" on MySQL
// and PostgreSQL) and returns it quoted for dialect.
func quoteTable(dialect, table string) (string, error) {
	parts := strings.Split(table, ".")
	if len(parts) > 2 || (len(parts) == 2 && dialect == DialectSQLite) {
		return "", driverkit.BadOption("mysqllock", "table %q: want NAME or SCHEMA.NAME (SQLite: NAME)", table)
	}
	q := "`"
	if dialect != DialectMySQL {
		q = `"`
	}
	for i, p := range parts {
		if !identPart.MatchString(p) {
			return "", driverkit.BadOption("mysqllock", "table %q: each part must match [A-Za-z_][A-Za-z0-9_]* and be at most 63 characters", table)
		}
		parts[i] = q + p + q
	}
	return strings.Join(parts, "."), nil
}

// DDL returns the CREATE TABLE statements that the driver runs on first
// use (unless WithCreateTable(false)), for teams that manage their schemas
// themselves: the lock table, and the table of shared leases beside it
// (its name with "_leases" after it; D28), and the table of weighted holds
// (its name with "_weighted" after it). dialect is DialectMySQL,
// DialectPostgres or DialectSQLite; table is validated as WithTable
// validates it. A lock table made by an earlier version lacks the column
// lease_id: the driver adds it on first use, or, without create_table,
// "ALTER TABLE <table> ADD COLUMN lease_id BIGINT" does.
func DDL(dialect, table string) (string, error) {
	stmts, err := DDLStatements(dialect, table)
	if err != nil {
		return "", err
	}
	return strings.Join(stmts, ";\n") + ";\n", nil
}

// DDLStatements returns DDL's statements one by one, for a program that
// runs them: MySQL and PostgreSQL's extended protocol take one statement
// per call.
func DDLStatements(dialect, table string) ([]string, error) {
	q, err := quoteTable(dialect, table)
	if err != nil {
		return nil, err
	}
	ql, err := quoteTable(dialect, leasesTable(table))
	if err != nil {
		return nil, err
	}
	qw, err := quoteTable(dialect, weightedTable(table))
	if err != nil {
		return nil, err
	}
	st, err := loadStatements(dialect, q, ql, qw)
	if err != nil {
		return nil, err
	}
	return []string{st.create, st.createLeases, st.w.create}, nil
}
