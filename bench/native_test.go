package bench_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/golocker/locker/bench"
)

// TestNativeLockCancel checks that a native lock's waiting Lock ends with
// its ctx and leaves nothing behind: the server sees the wait, the ctx is
// cancelled, Lock returns ctx's error; the lock then goes to another
// handle once its holder releases it (the abandoned wait did not take
// it), and the cancelled handle locks and unlocks again on its
// connection. RunBackend relies on this between its warm-up and its
// measured run.
func TestNativeLockCancel(t *testing.T) {
	cases := []struct {
		backend, config, driver string
		// waiters counts the sessions waiting for the lock of name, with
		// args.
		waiters string
		args    func(name string) []any
	}{
		{bench.Postgres, bench.PGAdvisory + "-own", "pgx",
			`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
				AND ((classid::bigint << 32) | objid::bigint) = $1`,
			func(name string) []any { return []any{bench.PGAdvisoryKey(name)} }},
		{bench.MySQL, bench.MySQLGetLock + "-own", "mysql",
			// The statement's text, not its values: no other test of the
			// package runs alongside this one.
			`SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT GET_LOCK(%'`,
			func(string) []any { return nil }},
	}
	for _, c := range cases {
		t.Run(c.backend, func(t *testing.T) {
			tgt := backendServers[c.backend].Get(t)
			if tgt.target == "" {
				t.Skipf("no %s server", c.backend)
			}
			var cfg bench.Config
			for _, x := range bench.BackendConfigs(c.backend) {
				if x.Name == c.config {
					cfg = x
				}
			}
			if cfg.Open == nil {
				t.Fatalf("no configuration %s on %s", c.config, c.backend)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			admin, err := sql.Open(c.driver, tgt.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			const name = "bench/native-cancel"
			// A wait may last maxWait (GET_LOCK's timeout) whatever ctx
			// says: a Lock that ignored ctx would take far longer than
			// the bound below.
			const maxWait = 10 * time.Minute
			set, err := cfg.Open(ctx, tgt.target, name, 3, maxWait)
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			h0, h1, h2 := set.Handles[0], set.Handles[1], set.Handles[2]

			if err := h0.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			wctx, wcancel := context.WithCancel(ctx)
			defer wcancel()
			done := make(chan error, 1)
			go func() { done <- h1.Lock(wctx) }()
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
				var n int
				if err := admin.QueryRowContext(ctx, c.waiters, c.args(name)...).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the server shows no waiter after a minute")
				}
			}
			wcancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("a cancelled Lock returned %v, want context.Canceled", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("Lock still waits a minute after its ctx was cancelled")
			}

			if err := h0.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			lctx, lcancel := context.WithTimeout(ctx, time.Minute)
			defer lcancel()
			if err := h2.Lock(lctx); err != nil {
				t.Fatalf("after the holder's release, another handle: %v (the cancelled wait kept the lock?)", err)
			}
			if err := h2.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := h1.Lock(lctx); err != nil {
				t.Fatalf("the cancelled handle, again: %v", err)
			}
			if err := h1.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
