// Command demo is golocker's demo on an embedded SQLite file, which `make
// demo` runs: worker processes take one lock in turn and append to a
// ledger that refuses a write whose fencing token is below one it has
// accepted; one worker is frozen (SIGSTOP) while it holds the lock, for
// longer than its lease; when it wakes up, its write is refused. It prints
// the timeline and a verdict, and exits 1 if the verdict is FAIL.
//
//	make demo                          # from the repository's root
//	go run . -url postgres://…/db      # from this directory, on another SQL database
//
// It imports package locker and the SQL driver only, so that a fresh
// machine downloads about 70 MB of modules and compiles nothing else:
// with make demo's flags (no optimizations, no cgo), 71 to 104 s from
// empty caches on a busy 2-core machine, most of it compiling
// modernc.org/sqlite. `lockctl demo` runs the same demo (package
// internal/demo) on any backend lockctl supports.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/demo"
	_ "github.com/golocker/locker/mysqllock"
)

// workerArg, as the first argument, makes the program a worker process of
// the demo.
const workerArg = "golocker-demo-worker"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == workerArg {
		if err := demo.Worker(ctx, os.Args[2:], os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		return
	}
	url := flag.String("url", "", "a backend shared between processes (default: a SQLite file in a new temporary directory)")
	flag.Parse()
	if err := run(ctx, *url); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url string) error {
	if url == "" {
		dir, err := os.MkdirTemp("", "golocker-demo-db-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		url = "sqlite://" + filepath.ToSlash(filepath.Join(dir, "locks.db"))
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	return demo.Run(ctx, demo.Config{
		URL:   url,
		Shown: locker.Redact(url),
		Worker: func(ctx context.Context, args ...string) *exec.Cmd {
			return exec.CommandContext(ctx, self, append([]string{workerArg}, args...)...)
		},
		Stdout: os.Stdout,
		Stderr: os.Stderr,
	})
}
