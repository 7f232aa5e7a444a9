package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Exit statuses; see the package doc.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 64
	exitBackend = 69
	exitHeld    = 75
	exitTimeout = 124
	exitLost    = 125
	exitNoExec  = 126
	exitNoCmd   = 127
)

// env is what a subcommand sees of the world, so tests can run it in
// process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// exitError carries an exit status and the message to print.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

func usage(format string, args ...any) error { return fail(exitUsage, format, args...) }

const usageText = `usage:
  lockctl [--url URL] run [--wait D] [--ttl D] [--grace D] NAME -- CMD [ARGS...]
  lockctl [--url URL] list [--prefix P] [--json]
  lockctl [--url URL] release --force NAME
  lockctl [--url URL] bench [--workers N] [--duration D] [--hold D] [--think D]
  lockctl [--url URL] demo

The backend is --url, else $LOCKER_URL, else a SQLite file in the user cache directory.
Exit status: the command's; 64 usage, 69 backend, 75 held, 124 timed out, 125 hold lost.`

func main() {
	e := env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	os.Exit(run(context.Background(), os.Args[1:], e))
}

// run runs one lockctl invocation and returns its exit status.
func run(ctx context.Context, args []string, e env) int {
	err := dispatch(ctx, args, e)
	if err == nil {
		return exitOK
	}
	var xe *exitError
	if !errors.As(err, &xe) {
		xe = &exitError{code: exitFailure, msg: err.Error()}
	}
	if xe.msg != "" {
		fmt.Fprintln(e.stderr, "lockctl: "+strings.TrimPrefix(xe.msg, "locker: "))
	}
	if xe.code == exitUsage {
		fmt.Fprintln(e.stderr, "run 'lockctl help' for usage")
	}
	return xe.code
}

func dispatch(ctx context.Context, args []string, e env) error {
	global := flag.NewFlagSet("lockctl", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	url := global.String("url", "", "backend URL")
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(e.stdout, usageText)
			return nil
		}
		return usage("%v", err)
	}
	args = global.Args()
	if len(args) == 0 {
		return usage("no subcommand")
	}
	cmd, args := args[0], args[1:]
	g := globals{url: *url}
	switch cmd {
	case "run":
		return cmdRun(ctx, g, args, e)
	case "list":
		return cmdList(ctx, g, args, e)
	case "release":
		return cmdRelease(ctx, g, args, e)
	case "bench":
		return cmdBench(ctx, g, args, e)
	case "demo":
		return cmdDemo(ctx, g, args, e)
	case demoWorkerCmd:
		return cmdDemoWorker(ctx, g, args, e)
	case "help", "-h", "--help":
		fmt.Fprintln(e.stdout, usageText)
		return nil
	}
	return usage("unknown subcommand %q", cmd)
}

// globals are the flags before the subcommand.
type globals struct{ url string }

// newFlags returns a subcommand's flag set, with --url accepted there too.
func newFlags(name string, g *globals) *flag.FlagSet {
	fs := flag.NewFlagSet("lockctl "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&g.url, "url", g.url, "backend URL")
	return fs
}

// parseArgs parses flags anywhere before a "--" (so `release NAME --force`
// works), and returns the positional arguments and what follows "--".
func parseArgs(fs *flag.FlagSet, args []string) (pos, rest []string, dash bool, err error) {
	before := args
	for i, a := range args {
		if a == "--" {
			before, rest, dash = args[:i], args[i+1:], true
			break
		}
	}
	for len(before) > 0 {
		if err := fs.Parse(before); err != nil {
			return nil, nil, false, usage("%s: %v", fs.Name(), err)
		}
		before = fs.Args()
		if len(before) > 0 {
			pos = append(pos, before[0])
			before = before[1:]
		}
	}
	return pos, rest, dash, nil
}

// durationValue is a flag.Value for a duration that remembers whether it was
// set, and whose errors say what a duration looks like.
type durationValue struct {
	d   time.Duration
	set bool
}

func (v *durationValue) String() string { return v.d.String() }

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("bad duration %q (want e.g. 0, 500ms, 30s, 5m)", s)
	}
	if d < 0 {
		return fmt.Errorf("bad duration %q: negative", s)
	}
	v.d, v.set = d, true
	return nil
}
