package sqlserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"go.uber.org/goleak"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/golocker/locker/internal/testserver"
)

// smokeLock is shaped like a lock table: one row per name, never deleted.
type smokeLock struct {
	ID    uint   `gorm:"primaryKey"`
	Name  string `gorm:"size:191;not null;uniqueIndex"`
	Owner string `gorm:"size:64"`
	Fence int64  `gorm:"not null;default:0"`
}

func TestMySQL(t *testing.T) { testSQLServer(t, StartMySQL, mysql.Open) }

func TestPostgres(t *testing.T) { testSQLServer(t, StartPostgres, postgres.Open) }

func TestSQLite(t *testing.T) { testSQLServer(t, StartSQLite, sqlite.Open) }

// testSQLServer starts one server, runs the smoke checks against it in
// subtests, and after the server's test has ended checks that nothing it
// started is still running.
func testSQLServer(t *testing.T, start func(testserver.TB) *SQLServer, open func(string) gorm.Dialector) {
	var trace testserver.ServerTrace
	t.Run("server", func(t *testing.T) {
		begin := time.Now()
		srv := start(t)
		t.Logf("%s server ready in %v", srv.Dialect, time.Since(begin).Round(time.Millisecond))
		defer func() { trace = testserver.TraceOf(srv.Proc) }()

		t.Run("rows go in and come out", func(t *testing.T) {
			gdb := smokeTable(t, open, srv.NewDatabase(t))
			if err := gdb.Create(&smokeLock{Name: "orders/42", Owner: "a", Fence: 1}).Error; err != nil {
				t.Fatalf("insert: %v", err)
			}
			var got smokeLock
			if err := gdb.Where("name = ?", "orders/42").First(&got).Error; err != nil {
				t.Fatalf("select: %v", err)
			}
			if got.Owner != "a" || got.Fence != 1 {
				t.Fatalf("select returned %+v", got)
			}
		})

		t.Run("a duplicate lock name is rejected", func(t *testing.T) {
			gdb := smokeTable(t, open, srv.NewDatabase(t))
			if err := gdb.Create(&smokeLock{Name: "jobs/nightly", Owner: "a"}).Error; err != nil {
				t.Fatalf("first insert: %v", err)
			}
			err := gdb.Create(&smokeLock{Name: "jobs/nightly", Owner: "b"}).Error
			if !errors.Is(err, gorm.ErrDuplicatedKey) {
				t.Fatalf("second insert: got %v, want gorm.ErrDuplicatedKey", err)
			}
			// The lock-shaped acquire: take the row only if it is free.
			res := gdb.Model(&smokeLock{}).Where("name = ? AND owner = ?", "jobs/nightly", "").
				Updates(map[string]any{"owner": "b", "fence": gorm.Expr("fence + 1")})
			if res.Error != nil || res.RowsAffected != 0 {
				t.Fatalf("conditional update of a held row: affected %d, err %v; want 0, nil", res.RowsAffected, res.Error)
			}
		})

		t.Run("each test gets a database of its own", func(t *testing.T) {
			a, b := srv.NewDatabase(t), srv.NewDatabase(t)
			if a.Name == b.Name || a.DSN == b.DSN {
				t.Fatalf("two databases share a name: %q, %q", a.Name, b.Name)
			}
			smokeTable(t, open, a)
			gb := openGORM(t, open, b)
			if gb.Migrator().HasTable(&smokeLock{}) {
				t.Fatalf("table created in %s is visible in %s", a.Name, b.Name)
			}
		})

		t.Run("URL names the database of the DSN", func(t *testing.T) {
			db := srv.NewDatabase(t)
			checkSQLURL(t, db)
		})

		if srv.Proc != nil {
			t.Run("a paused server answers nothing until resumed", func(t *testing.T) {
				gdb := openGORM(t, open, srv.NewDatabase(t))
				sqlDB, _ := gdb.DB()
				if err := srv.Pause(); err != nil {
					t.Fatalf("Pause: %v", err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				err := sqlDB.PingContext(ctx)
				cancel()
				if rerr := srv.Resume(); rerr != nil {
					t.Fatalf("Resume: %v", rerr)
				}
				if err == nil {
					t.Fatalf("ping of a paused server succeeded")
				}
				ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := testserver.PollUntil(ctx, sqlDB.PingContext); err != nil {
					t.Fatalf("ping after Resume: %v", err)
				}
			})

			t.Run("rows survive a restart", func(t *testing.T) {
				gdb := smokeTable(t, open, srv.NewDatabase(t))
				if err := gdb.Create(&smokeLock{Name: "kept", Owner: "a"}).Error; err != nil {
					t.Fatalf("insert: %v", err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				begin := time.Now()
				if err := srv.Restart(ctx); err != nil {
					t.Fatalf("Restart: %v", err)
				}
				t.Logf("restarted in %v", time.Since(begin).Round(time.Millisecond))
				var n int64
				// The pool's old connections died with the server; a
				// few attempts let database/sql replace them.
				err := testserver.PollUntil(ctx, func(context.Context) error {
					return gdb.Model(&smokeLock{}).Where("name = ?", "kept").Count(&n).Error
				})
				if err != nil || n != 1 {
					t.Fatalf("after restart: count %d, err %v; want 1, nil", n, err)
				}
			})

			t.Run("the server comes back after a kill", func(t *testing.T) {
				gdb := smokeTable(t, open, srv.NewDatabase(t))
				if n := len(testserver.Leftovers(testserver.TraceOf(srv.Proc))); n < 1 {
					t.Fatalf("found %d server processes before the kill", n)
				}
				if err := srv.Kill(); err != nil {
					t.Fatalf("Kill: %v", err)
				}
				if left := testserver.Leftovers(testserver.TraceOf(srv.Proc)); len(left) > 0 {
					t.Fatalf("processes %v alive after Kill", left)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := srv.Restart(ctx); err != nil {
					t.Fatalf("Restart after Kill: %v", err)
				}
				err := testserver.PollUntil(ctx, func(context.Context) error {
					return gdb.Create(&smokeLock{Name: "after-crash"}).Error
				})
				if err != nil {
					t.Fatalf("insert after crash and restart: %v", err)
				}
			})
		}
	})
	testserver.RequireProcsGone(t, trace)
}

// smokeTable opens db with GORM and creates the smokeLock table in it.
func smokeTable(t *testing.T, open func(string) gorm.Dialector, db *SQLDatabase) *gorm.DB {
	t.Helper()
	gdb := openGORM(t, open, db)
	if err := gdb.AutoMigrate(&smokeLock{}); err != nil {
		t.Fatalf("AutoMigrate: %v", err)
	}
	return gdb
}

func openGORM(t *testing.T, open func(string) gorm.Dialector, db *SQLDatabase) *gorm.DB {
	t.Helper()
	gdb, err := gorm.Open(open(db.DSN), &gorm.Config{
		TranslateError: true,
		Logger:         logger.Discard,
	})
	if err != nil {
		t.Fatalf("gorm.Open(%s): %v", db.Dialect, err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		t.Fatalf("gorm DB: %v", err)
	}
	t.Cleanup(func() { sqlDB.Close() })
	return gdb
}

func checkSQLURL(t *testing.T, db *SQLDatabase) {
	t.Helper()
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatalf("URL does not parse: %v", err)
	}
	if u.Scheme != db.Dialect {
		t.Errorf("URL scheme %q, want %q", u.Scheme, db.Dialect)
	}
	switch db.Dialect {
	case DialectSQLite:
		if u.Host != "" || u.Path != db.DSN || !filepath.IsAbs(u.Path) {
			t.Errorf("URL %q: want sqlite:// and the absolute path %q", db.URL, db.DSN)
		}
		if err := os.WriteFile(u.Path, nil, 0o644); err != nil {
			t.Errorf("the URL's path is not writable: %v", err)
		}
	default:
		if u.Path != "/"+db.Name {
			t.Errorf("URL path %q, want /%s", u.Path, db.Name)
		}
		if db.Server.Proc != nil && u.Hostname() != "127.0.0.1" {
			t.Errorf("URL host %q, want 127.0.0.1", u.Hostname())
		}
		if pw, ok := u.User.Password(); !ok || pw == "" || !strings.Contains(db.DSN, pw) {
			t.Errorf("URL and DSN do not carry the same password")
		}
	}
}

func TestMySQLFromEnv(t *testing.T) {
	srv := StartMySQL(t)
	if srv.Proc == nil {
		t.Skipf("%s is set already", EnvMySQLDSN)
	}
	cfg := srv.admin.(mysqlAdmin).cfg
	forms := []struct{ name, value string }{
		{"DSN", cfg.FormatDSN()},
		{"URL", (&url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/ignored"}).String()},
	}
	for _, f := range forms {
		t.Run("a server named by a "+f.name+" is used", func(t *testing.T) {
			t.Setenv(EnvMySQLDSN, f.value)
			testEnvSQLServer(t, StartMySQL, mysql.Open, srv.Addr)
		})
	}
	t.Run("an unreachable server's error hides the password", func(t *testing.T) {
		testserver.CheckEnvErrorHidesPassword(t, EnvMySQLDSN, "mysql://u:sekrit-pw@127.0.0.1:1/", func(t testserver.TB) { StartMySQL(t) })
	})
}

func TestPostgresFromEnv(t *testing.T) {
	srv := StartPostgres(t)
	if srv.Proc == nil {
		t.Skipf("%s is set already", EnvPostgresDSN)
	}
	t.Run("a server named by a URL is used", func(t *testing.T) {
		t.Setenv(EnvPostgresDSN, srv.admin.(postgresAdmin).u.String())
		testEnvSQLServer(t, StartPostgres, postgres.Open, srv.Addr)
	})
	t.Run("an unreachable server's error hides the password", func(t *testing.T) {
		testserver.CheckEnvErrorHidesPassword(t, EnvPostgresDSN, "postgres://u:sekrit-pw@127.0.0.1:1/db", func(t testserver.TB) { StartPostgres(t) })
	})
	t.Run("a value that is not a URL is rejected without echoing it", func(t *testing.T) {
		testserver.CheckEnvErrorHidesPassword(t, EnvPostgresDSN, "host=127.0.0.1 password=sekrit-pw", func(t testserver.TB) { StartPostgres(t) })
	})
}

func testEnvSQLServer(t *testing.T, start func(testserver.TB) *SQLServer, open func(string) gorm.Dialector, addr string) {
	env := start(t)
	if env.Proc != nil || env.Addr != addr {
		t.Fatalf("got a server at %s (started here: %v), want the one at %s", env.Addr, env.Proc != nil, addr)
	}
	db := env.NewDatabase(t)
	smokeTable(t, open, db)
	checkSQLURL(t, db)
}

// TestMySQLSharedAcrossTests shows the pattern for packages: one server on
// a package-wide TB, one database per test.
func TestMySQLSharedAcrossTests(t *testing.T) {
	var s testserver.Shared
	var srv *SQLServer
	if out := s.Run(func(st testserver.TB) { srv = StartMySQL(st) }); out.Skipped || out.Failed {
		s.Close()
		t.Skipf("no shared server: %s", out.Message)
	}
	names := map[string]bool{}
	for i := range 3 {
		t.Run(fmt.Sprintf("test %d", i), func(t *testing.T) {
			db := srv.NewDatabase(t)
			names[db.Name] = true
			smokeTable(t, mysql.Open, db)
		})
	}
	if len(names) != 3 {
		t.Fatalf("3 tests got %d distinct databases", len(names))
	}
	trace := testserver.TraceOf(srv.Proc)
	s.Close()
	testserver.RequireProcsGone(t, trace)
}

// tracked holds the server processes these tests started: TestMain fails
// the run if one of them, or a goroutine, outlived the tests.
var tracked testserver.Tracker

func TestMain(m *testing.M) { os.Exit(tracked.MainChecked(m, func() error { return goleak.Find() })) }
