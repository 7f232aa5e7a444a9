package mysqllock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/golocker/locker/internal/testserver/sqlserver"
	"github.com/golocker/locker/mysqllock"
)

// gormDialect is GORM's opener of each dialect's DSN.
var gormDialect = map[string]func(dsn string) gorm.Dialector{
	mysqllock.DialectMySQL:    mysql.Open,
	mysqllock.DialectPostgres: postgres.Open,
	mysqllock.DialectSQLite:   sqlite.Open,
}

// openGORM opens db with GORM as an application would, with a logger
// that records every statement and error.
func openGORM(t *testing.T, db *sqlserver.SQLDatabase, dsn string) (*gorm.DB, *recorder) {
	t.Helper()
	if dsn == "" {
		dsn = db.DSN
	}
	rec := &recorder{}
	gdb, err := gorm.Open(gormDialect[db.Dialect](dsn), &gorm.Config{Logger: rec})
	if err != nil {
		t.Fatalf("gorm.Open: %v", err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sqlDB.Close() })
	return gdb, rec
}

// recorder is a GORM logger that keeps every statement's SQL and error.
type recorder struct {
	mu     sync.Mutex
	sqls   []string
	errors []error
}

func (r *recorder) LogMode(logger.LogLevel) logger.Interface      { return r }
func (r *recorder) Info(context.Context, string, ...interface{})  {}
func (r *recorder) Warn(context.Context, string, ...interface{})  {}
func (r *recorder) Error(context.Context, string, ...interface{}) {}
func (r *recorder) Trace(_ context.Context, _ time.Time, fc func() (string, int64), err error) {
	sql, _ := fc()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sqls = append(r.sqls, sql)
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		r.errors = append(r.errors, err)
	}
}

func (r *recorder) errorsContaining(s string) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []error
	for _, err := range r.errors {
		if strings.Contains(strings.ToLower(err.Error()), s) {
			out = append(out, err)
		}
	}
	return out
}
