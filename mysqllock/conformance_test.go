package mysqllock_test

import (
	"context"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/matrix"
	"github.com/golocker/locker/mysqllock"
)

// TestConformance runs the suite on each database, every driver opened
// from the URL as another process would, and records the results for the
// feature matrix under "mysql", "postgres" and "sqlite".
func TestConformance(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			db := newDatabase(t, dialect)
			rep := conformance.Run(t, conformance.Harness{
				Name: dialect,
				NewDriver: func(ctx context.Context) (backend.Driver, error) {
					return mysqllock.Open(ctx, db.URL)
				},
				TTL: time.Second,
			})
			matrix.Record(t, rep)
		})
	}
}
