package main

import (
	"context"
	"errors"
	"os"
	"os/exec"

	"github.com/golocker/locker/internal/demo"
)

// demoWorkerCmd is the hidden subcommand that demo starts in each worker
// process.
const demoWorkerCmd = "demo-worker"

// cmdDemo runs golocker's demo (package internal/demo, which `make demo`
// runs too, on SQLite) on the backend lockctl is given: worker processes,
// one frozen while it holds the lock, a ledger fenced by token.
func cmdDemo(ctx context.Context, g globals, args []string, e env) error {
	fs := newFlags("demo", &g)
	if err := parseNoArgs(fs, args, ""); err != nil {
		return err
	}
	u, _, err := backendURL(g, e)
	if err != nil {
		return fail(exitBackend, "%v", err)
	}
	shown, err := sharedBackend(ctx, g, e, "demo", " (leave --url unset for the embedded SQLite default)")
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fail(exitFailure, "demo: %v", err)
	}
	err = demo.Run(ctx, demo.Config{
		URL:   u,
		Shown: shown,
		Worker: func(ctx context.Context, args ...string) *exec.Cmd {
			return exec.CommandContext(ctx, self, append([]string{demoWorkerCmd}, args...)...)
		},
		Stdout: e.stdout,
		Stderr: e.stderr,
	})
	switch {
	case errors.Is(err, demo.ErrFailed):
		return &exitError{code: exitFailure} // the verdict says why
	case err != nil:
		return fail(exitFailure, "demo: %v", err)
	}
	return nil
}

// cmdDemoWorker is one worker process of demo; the backend is $LOCKER_URL,
// which demo sets.
func cmdDemoWorker(ctx context.Context, _ globals, args []string, e env) error {
	return demo.Worker(ctx, args, e.stdin, e.stdout)
}
