package mysqllock

import (
	"bufio"
	"embed"
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
	takeTicket   string
	look         string
	renew        string
	renewCheck   string // MySQL
	renewBatch   string
	renewStamped string // MySQL
	release      string
	releaseAny   string
	forceRelease string
	holds        string
}

// loadStatements reads the embedded SQL of dialect, over the statements
// that dialects share (sql/common.sql: a dialect's statement of the same
// name replaces the shared one), and fills in the quoted table name and
// the fragments ({free}, {now}, ...).
func loadStatements(dialect, quotedTable string) (statements, error) {
	b, err := sqlFiles.ReadFile("sql/" + dialect + ".sql")
	if err != nil || dialect == "common" {
		return statements{}, fmt.Errorf("mysqllock: no SQL for dialect %q", dialect)
	}
	common, err := sqlFiles.ReadFile("sql/common.sql")
	if err != nil {
		return statements{}, fmt.Errorf("mysqllock: the shared SQL: %w", err)
	}
	named := parseNamed(string(common))
	maps.Copy(named, parseNamed(string(b)))
	pairs := []string{"{table}", quotedTable}
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
		create: fill("create"), acquire: fill("acquire"), insert: fill("insert"), takeTicket: fill("take_ticket"), look: fill("look"),
		renew: fill("renew"), renewCheck: fill("renew_check"), renewBatch: fill("renew_batch"),
		renewStamped: fill("renew_stamped"), release: fill("release"), releaseAny: fill("release_any"),
		forceRelease: fill("force_release"), holds: fill("holds"),
	}
	required := []string{st.create, st.acquire, st.takeTicket, st.look, st.renew, st.renewBatch, st.release, st.releaseAny, st.forceRelease, st.holds}
	if dialect == DialectMySQL {
		required = append(required, st.insert, st.renewCheck, st.renewStamped)
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

// DDL returns the CREATE TABLE statement that the driver runs on first use
// (unless WithCreateTable(false)), for teams that manage their schemas
// themselves. dialect is DialectMySQL, DialectPostgres or DialectSQLite;
// table is validated as WithTable validates it.
func DDL(dialect, table string) (string, error) {
	q, err := quoteTable(dialect, table)
	if err != nil {
		return "", err
	}
	st, err := loadStatements(dialect, q)
	if err != nil {
		return "", err
	}
	return st.create + ";\n", nil
}
