// Command ferretdb runs an embedded FerretDB server with the SQLite handler,
// as a stand-in for mongod in golocker's tests on machines that have no
// mongod.
//
// It lives in its own module so that FerretDB's dependencies stay out of
// golocker's go.mod files. Package internal/testserver/mongoserver builds it
// on first use and caches the binary; nothing else should need to run it by
// hand:
//
//	ferretdb -listen 127.0.0.1:27018 -dir /tmp/data
//
// It serves until SIGINT or SIGTERM, or until its parent process goes away
// (so a test binary killed without cleanup does not leave it behind).
//
// It is configured for tests, as golocker's other test servers are: SQLite
// runs with synchronous=OFF (no fsync: a killed server loses nothing it
// acknowledged, only a crash of the machine would), every collection gets
// an index that FerretDB's lookups by _id can use (index.go), and the
// garbage collector runs at GOGC=400.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	runtimedebug "runtime/debug"
	"syscall"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:27017", "TCP address to listen on (loopback only)")
	dir := flag.String("dir", "", "directory for the SQLite databases (created if missing)")
	debug := flag.Bool("debug", false, "log at debug level instead of warn")
	flag.Parse()

	if *dir == "" {
		return errors.New("-dir is required")
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("-listen: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-listen: %q is not a loopback IP address", host)
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return fmt.Errorf("-dir: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return fmt.Errorf("-dir: %w", err)
	}

	// FerretDB allocates much per command: collecting less often took
	// about a tenth off the time of mongolock's operations here.
	runtimedebug.SetGCPercent(400)

	level := slog.LevelWarn
	if *debug {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	f, err := ferretdb.New(&ferretdb.Config{
		Listener: ferretdb.ListenerConfig{TCP: *listen},
		Logger:   logger,
		Handler:  "sqlite",
		// The SQLite handler wants a directory URI ending in a slash;
		// it keeps one database file per MongoDB database there, and
		// runs each _pragma on every connection.
		SQLiteURL: "file:" + abs + "/?_pragma=synchronous(off)",
	})
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go watchParent(ctx, cancel)
	go (&indexer{dir: abs, log: logger}).run(ctx)

	logger.Warn("ferretdb serving", "addr", *listen, "dir", abs)
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// FerretDB gives connected clients three seconds to go away before it
	// returns. A test that stops the server wants it gone now, as a
	// stopped mongod would be; SQLite keeps committed data across an
	// abrupt exit.
	select {
	case err := <-done:
		return err
	case <-time.After(shutdownGrace):
		logger.Warn("ferretdb exiting without waiting for clients")
		return nil
	}
}

// shutdownGrace is how long a stopping server waits for FerretDB to close
// its connections.
const shutdownGrace = 300 * time.Millisecond

// watchParent cancels when this process is re-parented, which happens when
// the process that started it exits without stopping it.
func watchParent(ctx context.Context, cancel context.CancelFunc) {
	parent := os.Getppid()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if os.Getppid() != parent {
				cancel()
				return
			}
		}
	}
}
