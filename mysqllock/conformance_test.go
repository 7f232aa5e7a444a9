package mysqllock_test

import (
	"context"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/matrix"
	"github.com/golocker/locker/internal/testserver/sqlserver"
	"github.com/golocker/locker/mysqllock"
)

// TestConformance runs the suite on each database, every driver opened
// from the URL as another process would, and records the results for the
// feature matrix under "mysql", "postgres" and "sqlite". MariaDB and
// PostgreSQL connections go through a conformance.FaultNet for the fault
// checks, and their servers are killed and restarted on their data
// directories (both keep what they acknowledged over a crash): the suite
// opens a client while the server is down, which gets a driver opened
// before the kill. SQLite has no network: the suite wraps its driver.
func TestConformance(t *testing.T) {
	conformanceOf(t, "", matrix.Record)
}

// TestConformanceSharedLease runs the suite on each database with shared
// leases (WithSharedLease): they are not in the feature matrix, which has
// a column per database, but every check must pass with them too.
func TestConformanceSharedLease(t *testing.T) {
	conformanceOf(t, "shared_lease=true", func(*testing.T, *conformance.Report) {})
}

// conformanceOf runs the suite on each database, with query added to the
// URLs, and hands the results to record.
func conformanceOf(t *testing.T, query string, record func(*testing.T, *conformance.Report)) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			db := newDatabase(t, dialect)
			if query != "" {
				db.URL += sep(db.URL) + query
			}
			// spare is a driver opened before a KillServer: the one
			// server is down until the check restarts it, and Open
			// checks that the database answers.
			spare := make(chan backend.Driver, 1)
			h := conformance.Harness{
				Name: dialect,
				NewDriver: func(ctx context.Context) (backend.Driver, error) {
					select {
					case d := <-spare:
						return d, nil
					default:
						return mysqllock.Open(ctx, db.URL)
					}
				},
				TTL:       time.Second,
				Footprint: footprintOf(t, db),
			}
			if dialect == mysqllock.DialectSQLite {
				// SQLite is C translated to Go, which the race detector
				// slows twentyfold: on two cores the exclusion and
				// scale checks take 45-50s there (3s and 15s without
				// it), too close to the default bound of 60s. A
				// statement can then take most of a second under load:
				// a 1s lease lost holds in the scale check when its
				// renewals came late, so SQLite gets 3s.
				h.Timeout = 3 * time.Minute
				h.TTL = 3 * time.Second
				if query != "" {
					// The checks of shared leases on SQLite's statements
					// without the 100s of a second full scale check.
					h.Scale = 1000
				}
			}
			if srv := db.Server; dialect != mysqllock.DialectSQLite {
				h.NewFaultyDriver = drivertest.FaultyOpen(mysqllock.Open, db.URL, mysqllock.WithDialer)
				if srv.Proc != nil {
					h.KillServer = func(ctx context.Context) (func(context.Context) error, error) {
						d, err := mysqllock.Open(ctx, db.URL)
						if err != nil {
							return nil, err
						}
						spare <- d
						restart := func(ctx context.Context) error {
							select {
							case d := <-spare: // not handed out
								_ = d.Close()
							default:
							}
							return srv.Restart(ctx)
						}
						return restart, srv.Kill()
					}
				}
			}
			record(t, conformance.Run(t, h))
		})
	}
}

// footprintOf is the Harness's Footprint on db: the rows of the lock table
// and of the table of weighted holds whose names are the suite's.
func footprintOf(t *testing.T, db *sqlserver.SQLDatabase) func(context.Context) (int, error) {
	gdb, _ := openGORM(t, db, "")
	return func(ctx context.Context) (int, error) {
		n := 0
		for _, table := range []string{mysqllock.DefaultTable, mysqllock.DefaultTable + "_weighted"} {
			var c int64
			q := "SELECT COUNT(*) FROM " + table + " WHERE name LIKE 'conformance/%'"
			if err := gdb.WithContext(ctx).Raw(q).Scan(&c).Error; err != nil {
				return 0, err
			}
			n += int(c)
		}
		return n, nil
	}
}
