package mysqllock

import (
	"net/url"
	"strings"
	"testing"

	"github.com/golocker/locker/internal/drivertest"
)

const secret = "s3cr%2Ft-pw"

// parseOnly parses u for the checks of refused URLs: only its error counts.
func parseOnly(u *url.URL) error {
	_, err := parseURL(u)
	return err
}

func TestParseURL(t *testing.T) {
	good := []struct {
		url, dialect, dsn string // dsn: a substring of the database driver's DSN
	}{
		{"mysql://u:" + secret + "@db.example:3307/app", DialectMySQL, "tcp(db.example:3307)/app"},
		{"mysql://u@db.example/app", DialectMySQL, "tcp(db.example:3306)/app"},
		{"mysql://u@[::1]/app?tls=skip-verify&timeout=5s", DialectMySQL, "tcp([::1]:3306)/app"},
		{"mysql://u@h/app?table=my_locks&create_table=false&max_conns=4", DialectMySQL, "/app"},
		{"mysql://u@h/app?table=otherdb.locks", DialectMySQL, "/app"},
		{"MySQL://u@h/app", DialectMySQL, "/app"},
		{"mariadb://u@h:3307/app", DialectMySQL, "tcp(h:3307)/app"},
		{"postgres://u:" + secret + "@h:5433/app?sslmode=disable", DialectPostgres, "postgres://u:s3cr%2Ft-pw@h:5433/app?sslmode=disable"},
		{"postgresql://u@h1:5432,h2:5432/app?target_session_attrs=read-write", DialectPostgres, "h1:5432,h2:5432/app"},
		{"postgres://u@h/app?wait_conns=0&table=public.locks", DialectPostgres, "postgres://u@h/app"},
		{"mysql://u@h/app?wait_conns=4&max_conns=2", DialectMySQL, "/app"},
		{"sqlite:///var/lib/app/locks.db", DialectSQLite, "file:/var/lib/app/locks.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)"},
		{"sqlite://localhost/var/lib/app/locks.db?busy_timeout=250ms", DialectSQLite, "busy_timeout(250)"},
		{"sqlite:///tmp/with%20space%3Fand%23hash.db", DialectSQLite, "file:/tmp/with%20space%3Fand%23hash.db?"},
		{"sqlite:///C:/locks/app.db", DialectSQLite, "C:/locks/app.db"}, // file:/C:/… off Windows
	}
	for _, tc := range good {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		tg, err := parseURL(u)
		if err != nil {
			t.Errorf("parseURL(%s): %v", tc.url, err)
			continue
		}
		if tg.dialect != tc.dialect {
			t.Errorf("parseURL(%s): dialect %q, want %q", tc.url, tg.dialect, tc.dialect)
		}
		var dsn string
		switch tg.dialect {
		case DialectMySQL:
			dsn = tg.mysql.FormatDSN()
		case DialectPostgres:
			dsn = tg.postgresDSN
		default:
			dsn = sqliteDSN(tg.sqlitePath, tg.busyTimeout)
		}
		if !strings.Contains(dsn, tc.dsn) {
			t.Errorf("parseURL(%s): DSN %q does not contain %q", tc.url, dsn, tc.dsn)
		}
	}

	bad := []string{
		"mysql://u:" + secret + "@h/",                     // no database
		"mysql://u:" + secret + "@h/app?tabel=x",          // typo
		"mysql://u:" + secret + "@h/app?table=x;drop",     // not an identifier
		"mysql://u:" + secret + "@h/app?table=a.b.c",      // too many parts
		"mysql://u:" + secret + "@h/app?notify=true",      // no such parameter
		"mysql://u:" + secret + "@h/app?wait_conns=-1",    // bad count
		"sqlite:///tmp/x.db?wait_conns=2",                 // nothing to wait on
		"mysql://u:" + secret + "@h/app?tls=maybe",        // bad value
		"mysql://u:" + secret + "@h/app?sslmode=disable",  // another driver's
		"mysql://u:" + secret + "@h/app?table=a&table=b",  // twice
		"mysql://u:" + secret + "@h/app#frag",             // fragment
		"mysql:opaque",                                    // not hierarchical
		"mysql://u:" + secret + "@h1,h2/app",              // two hosts
		"postgres://u:" + secret + "@h/app?tls=true",      // MySQL's
		"postgres://u:" + secret + "@h/app?create_table=", // bad bool
		"postgres://u:" + secret + "@h/app?max_conns=0",   // bad count
		"postgres://u:" + secret + "@h/a/b",               // path
		"postgres:///app",                                 // no host
		"sqlite://relative/locks.db",                      // relative path
		"sqlite:locks.db",                                 // relative path
		"sqlite:///",                                      // no file
		"sqlite:///dir/",                                  // a directory
		"sqlite://u:" + secret + "@/x.db",                 // credentials
		"sqlite:///x.db?table=main.locks",                 // schema on SQLite
		"sqlite:///x.db?busy_timeout=soon",                // bad duration
		"sqlite:///x.db?sslmode=disable",                  // unknown
		"oracle://h/app",                                  // scheme
	}
	for _, raw := range bad {
		t.Run(raw, func(t *testing.T) { drivertest.BadURL(t, raw, "", parseOnly, secret, "s3cr/t-pw") })
	}

	// Values no database accepts, or that the driver would ignore.
	impossible := map[string]string{
		"mysql://u:" + secret + "@h/app?timeout=-1s":       `timeout="-1s": negative`,
		"mysql://u:" + secret + "@h/app?read_timeout=-1s":  `read_timeout="-1s": negative`,
		"mysql://u:" + secret + "@h/app?write_timeout=-1s": `write_timeout="-1s": negative`,
		"sqlite:///x.db?max_conns=8":                       "sqlite:// uses one connection per process",
		"sqlite:///x.db?busy_timeout=500us":                "1ms or more",
		"sqlite:///x.db?busy_timeout=-1s":                  "1ms or more",
	}
	for raw, want := range impossible {
		t.Run(raw, func(t *testing.T) { drivertest.BadURL(t, raw, want, parseOnly, secret) })
	}
}

func TestQuoteTable(t *testing.T) {
	for _, tc := range []struct{ dialect, table, want string }{
		{DialectMySQL, "locks", "`locks`"},
		{DialectMySQL, "app.locks", "`app`.`locks`"},
		{DialectPostgres, "Locks_2", `"Locks_2"`},
		{DialectPostgres, "public.locks", `"public"."locks"`},
		{DialectSQLite, "locks", `"locks"`},
	} {
		if got, err := quoteTable(tc.dialect, tc.table); err != nil || got != tc.want {
			t.Errorf("quoteTable(%s, %s) = %s, %v; want %s", tc.dialect, tc.table, got, err, tc.want)
		}
	}
	for _, table := range []string{"", "1x", "a-b", "a b", "a`b", `a"b`, "a;b", "a.", ".a", "a.b.c", strings.Repeat("x", 64), "ä"} {
		if _, err := quoteTable(DialectPostgres, table); err == nil {
			t.Errorf("quoteTable(%q) accepted it", table)
		}
	}
	if _, err := quoteTable(DialectSQLite, "main.locks"); err == nil {
		t.Error("quoteTable accepted a schema on SQLite")
	}
}

func TestStatementsLoad(t *testing.T) {
	for _, dialect := range []string{DialectMySQL, DialectPostgres, DialectSQLite} {
		st, err := loadStatements(dialect, "T", "L", "W")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{st.create, st.acquire, st.look, st.renew, st.renewBatch, st.release, st.releaseAny, st.forceRelease, st.holds, st.leaseCheck} {
			if strings.Contains(s, "--") || strings.Contains(s, "{") || !strings.Contains(s, "T") {
				t.Errorf("%s: statement not filled in or with a comment left: %s", dialect, s)
			}
		}
		for _, s := range []string{st.createLeases, st.leaseCreate, st.leaseRenew, st.leaseKill, st.leaseGC, st.acquire, st.renew, st.release, st.forceRelease, st.holds} {
			if strings.Contains(s, "--") || strings.Contains(s, "{") || !strings.Contains(s, "L") {
				t.Errorf("%s: statement not filled in, with a comment left or without the leases table: %s", dialect, s)
			}
		}
		w := st.w
		for _, s := range []string{w.create, w.probe, w.head, w.prune, w.rows, w.insert, w.grantPlace, w.keepPlace, w.setHead, w.renew, w.release, w.releaseAny, w.dequeue, w.downgrade, w.proclaim, w.holds} {
			if strings.Contains(s, "--") || strings.Contains(s, "{") || !strings.Contains(s, "W") {
				t.Errorf("%s: statement not filled in, with a comment left or without the weighted table: %s", dialect, s)
			}
		}
		ddl, err := DDL(dialect, "locks")
		if err != nil || !strings.HasPrefix(ddl, "CREATE TABLE IF NOT EXISTS") || strings.Count(ddl, "CREATE TABLE IF NOT EXISTS") != 3 ||
			!strings.Contains(ddl, "locks_leases") || !strings.Contains(ddl, "locks_weighted") || !strings.Contains(ddl, "lease_id") {
			t.Errorf("DDL(%s) = %q, %v", dialect, ddl, err)
		}
		// A dialect's own statement replaces the shared one of the same
		// name (sql/common.sql), and the shared ones take its fragments.
		own := map[string][2]string{
			DialectMySQL:    {st.renew, "INTERVAL @lease_us MICROSECOND"},
			DialectPostgres: {st.releaseGated, "pg_advisory_unlock"},
			DialectSQLite:   {st.renew, "((@lease_us + 999) / 1000)"},
		}[dialect]
		if !strings.Contains(own[0], own[1]) {
			t.Errorf("%s: %q not in %s", dialect, own[1], own[0])
		}
	}
	for _, dialect := range []string{"common", "oracle", ""} {
		if _, err := loadStatements(dialect, "T", "L", "W"); err == nil {
			t.Errorf("loadStatements(%q) found a dialect", dialect)
		}
	}
}

func TestLeasesTable(t *testing.T) {
	long := strings.Repeat("x", 60)
	for table, want := range map[string]string{
		"locks":                        "locks_leases",
		"app.locks":                    "app.locks_leases",
		strings.Repeat("y", 56):        strings.Repeat("y", 56) + "_leases",
		long:                           long[:40] + "_",
		"s." + strings.Repeat("z", 57): "s." + strings.Repeat("z", 40) + "_",
	} {
		got := leasesTable(table)
		if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "_leases") {
			t.Errorf("leasesTable(%q) = %q, want %q...", table, got, want)
		}
		for _, dialect := range []string{DialectMySQL, DialectPostgres} {
			if _, err := quoteTable(dialect, got); err != nil {
				t.Errorf("leasesTable(%q) = %q: %v", table, got, err)
			}
		}
	}
	if a, b := leasesTable(long), leasesTable(long[:59]+"w"); a == b {
		t.Errorf("two long names share the leases table %q", a)
	}
}

// FuzzParseURL: no URL makes the parser panic or put the password in an
// error, and every URL it accepts names a dialect.
func FuzzParseURL(f *testing.F) {
	drivertest.FuzzURL(f, parseURL, func(t *testing.T, raw string, tg *target) {
		switch tg.dialect {
		case DialectMySQL, DialectPostgres, DialectSQLite:
		default:
			t.Fatalf("parseURL(%q) accepted it with dialect %q", raw, tg.dialect)
		}
	},
		"mysql://u:pw@h:3306/db?table=t", "postgres://u:pw@h1,h2/db?sslmode=require&wait_conns=0",
		"postgresql://u:pw@h/db", "sqlite:///tmp/x.db?busy_timeout=1s", "sqlite://h/x", "mysql://u:pw@h/db?x=%zz",
	)
}
