package main

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the driver FerretDB's SQLite handler registers too
)

// FerretDB 1.24's SQLite handler looks a document up by _id with
// `_ferretdb_sjson->'$._id' = ?` but indexes `_ferretdb_sjson->"_id"`, and
// SQLite uses an expression index only for the very expression it
// indexes: every lookup by _id scans its collection (EXPLAIN QUERY PLAN
// says SCAN), so each command costs in proportion to the collection's
// size. The indexer gives every collection table an index on the
// expression that the lookups use, soon after FerretDB creates it, as
// mongod's _id index would serve them.

const (
	// indexPoll is how often the indexer looks for new collection tables:
	// a new collection is small for its first moments, and a scan of a
	// few documents costs little.
	indexPoll = 50 * time.Millisecond
	// indexSuffix ends the name of each index the indexer creates.
	indexSuffix = "__id_lookup"
	// dbSuffix ends the name of FerretDB's database files.
	dbSuffix = ".sqlite"
)

// indexer remembers, per database file, what it last saw: a file whose
// write-ahead log has not changed since has no new table.
type indexer struct {
	dir  string
	log  *slog.Logger
	seen map[string]walState
}

type walState struct {
	size int64
	mod  time.Time
}

// run looks for unindexed collection tables every indexPoll until ctx
// ends.
func (x *indexer) run(ctx context.Context) {
	x.seen = make(map[string]walState)
	tick := time.NewTicker(indexPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		entries, err := os.ReadDir(x.dir)
		if err != nil {
			continue
		}
		present := make(map[string]bool, len(entries))
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), dbSuffix) {
				continue
			}
			path := filepath.Join(x.dir, e.Name())
			present[path] = true
			wal, err := os.Stat(path + "-wal")
			if err != nil {
				continue // not opened by FerretDB yet, or being dropped
			}
			st := walState{size: wal.Size(), mod: wal.ModTime()}
			if prev, ok := x.seen[path]; ok && prev == st {
				continue
			}
			if err := indexTables(ctx, path); err != nil {
				if ctx.Err() == nil {
					x.log.Debug("indexer", "file", e.Name(), "err", err)
				}
				continue
			}
			x.seen[path] = st
		}
		for path := range x.seen {
			if !present[path] {
				delete(x.seen, path)
			}
		}
	}
}

// indexTables creates the missing indexes of the database file at path.
// It opens the file only for the call: a connection kept open would keep
// a dropped database's log files behind after FerretDB removed the
// database.
func indexTables(ctx context.Context, path string) error {
	// mode=rw: a database dropped since the directory was read must not
	// be created again.
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	rows, err := db.QueryContext(ctx, `SELECT t.name FROM sqlite_master t
		WHERE t.type = 'table' AND t.sql LIKE '%_ferretdb_sjson%'
		AND NOT EXISTS (SELECT 1 FROM sqlite_master i WHERE i.type = 'index' AND i.name = t.name || ?)`, indexSuffix)
	if err != nil {
		return err
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return err
		}
		tables = append(tables, t)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	var errs []error
	for _, t := range tables {
		q := `CREATE INDEX IF NOT EXISTS "` + t + indexSuffix + `" ON "` + t + `" (_ferretdb_sjson->'$._id')`
		if _, err := db.ExecContext(ctx, q); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
