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

// Exit statuses; the package doc, usageText and the README list each
// (TestExitStatusesAreDocumented).
const (
	exitOK      = 0
	exitFailure = 1
	exitNotHeld = 3 // release: the lock was not held
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

// exitError carries an exit status and the message to print (on stdout
// when out is set: help).
type exitError struct {
	code int
	msg  string
	out  bool
}

func (e *exitError) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

func usage(format string, args ...any) error { return fail(exitUsage, format, args...) }

const usageText = `usage:
  lockctl [--url URL] run [--wait D] [--ttl D] [--grace D] [--quiet] NAME -- CMD [ARGS...]
  lockctl [--url URL] list [--prefix P] [--json]
  lockctl [--url URL] release --force NAME
  lockctl [--url URL] bench [--workers N] [--duration D] [--hold D] [--think D] [--name NAME]
  lockctl [--url URL] serve [--addr ADDR] [--read-only] [--token-env VAR] [--basic-auth-env VAR] [--prefix P]
  lockctl [--url URL] load [--duration D] [--workers N] [--handles N] [--rate R] [--out DIR] SCENARIO
  lockctl [--url URL] demo
  lockctl --version
  lockctl CMD --help       the flags of CMD

The backend is --url, else $LOCKER_URL, else a SQLite file in the user cache directory,
which lockctl names on stderr when it creates it, and when list or release find nothing
there. An in-process backend (mem://) is refused: no other process could see its locks.
URLs: redis://host:6379, etcd://h1:2379,h2:2379/prefix, zk://h1:2181/prefix,
postgres://user:password@host/db, mysql://..., sqlite:///abs/path.db, mongodb://...;
each driver's package doc lists its forms and parameters.

Exit status:
  the command's  run: the command's own (128+N if signal N killed it)
  0              success: --help, --version, a subcommand that did its work
  1              another failure (serve cannot listen, demo's verdict is FAIL, ...)
  3              release: the lock was not held, nothing was released
  64             bad usage: unknown flag or backend, bad duration or URL, empty name
  69             the backend failed, or cannot do it
  75             run --wait 0: the lock is held by another owner
  124            run --wait D: the lock was still held after D
  125            run: the hold was lost while the command ran
  126, 127       run: the command could not be run, or was not found
  130, 143       interrupted (SIGINT, SIGTERM) while waiting for the lock`

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
	if xe.out {
		fmt.Fprintln(e.stdout, xe.msg)
		return xe.code
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
	showVersion := global.Bool("version", false, "print the version and exit")
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(e.stdout, usageText)
			return nil
		}
		return usage("%v", err)
	}
	if *showVersion {
		fmt.Fprintln(e.stdout, versionText())
		return nil
	}
	args = global.Args()
	if len(args) == 0 {
		return usage("no subcommand")
	}
	cmd, args := args[0], args[1:]
	g := globals{url: *url}
	if run, ok := commands[cmd]; ok {
		return run(ctx, g, args, e)
	}
	switch cmd {
	case "help", "-h", "--help":
		if len(args) == 1 {
			if _, ok := synopses[args[0]]; ok {
				return dispatch(ctx, []string{args[0], "--help"}, e)
			}
		}
		fmt.Fprintln(e.stdout, usageText)
		return nil
	case "version":
		fmt.Fprintln(e.stdout, versionText())
		return nil
	}
	return usage("unknown subcommand %q", cmd)
}

// globals are the flags before the subcommand.
type globals struct{ url string }

// newFlags returns a subcommand's flag set, with --url accepted there too.
func newFlags(name string, g *globals) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&g.url, "url", g.url, "backend URL (default $LOCKER_URL, else a SQLite file in the user cache directory)")
	return fs
}

// commands run the subcommands, by name; the hidden ones, loadWorkerCmd
// and demoWorkerCmd, are the worker processes of load and demo.
var commands = map[string]func(ctx context.Context, g globals, args []string, e env) error{
	"run":         cmdRun,
	"list":        cmdList,
	"release":     cmdRelease,
	"bench":       cmdBench,
	"serve":       cmdServe,
	"demo":        cmdDemo,
	"load":        cmdLoad,
	loadWorkerCmd: cmdLoadWorker,
	demoWorkerCmd: cmdDemoWorker,
}

// synopses are the subcommands' usage lines, for --help.
var synopses = map[string]string{
	"run":     "lockctl [--url URL] run [--wait D] [--ttl D] [--grace D] [--quiet] NAME -- CMD [ARGS...]",
	"list":    "lockctl [--url URL] list [--prefix P] [--json]",
	"release": "lockctl [--url URL] release --force NAME",
	"bench":   "lockctl [--url URL] bench [--workers N] [--duration D] [--hold D] [--think D] [--name NAME]",
	"serve":   "lockctl [--url URL] serve [--addr ADDR] [--read-only] [--token-env VAR] [--basic-auth-env VAR] [--prefix P]",
	"load":    "lockctl [--url URL] load [--duration D] [--workers N] [--handles N] [--rate R] [--out DIR] SCENARIO",
	"demo":    "lockctl [--url URL] demo",
}

// helpFor returns the help of the subcommand whose flags are fs: its
// synopsis and its flags, printed on stdout with exit status 0.
func helpFor(fs *flag.FlagSet) error {
	var b strings.Builder
	b.WriteString("usage: " + synopses[fs.Name()] + "\n")
	var flags strings.Builder
	fs.SetOutput(&flags)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	b.WriteString("\nflags:\n" + flags.String())
	return &exitError{code: exitOK, msg: strings.TrimRight(b.String(), "\n"), out: true}
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
			if errors.Is(err, flag.ErrHelp) {
				return nil, nil, false, helpFor(fs)
			}
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

// parseNoArgs parses the flags of a subcommand that takes no positional
// arguments; hint ends the error that refuses some.
func parseNoArgs(fs *flag.FlagSet, args []string, hint string) error {
	pos, _, dash, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || dash {
		return usage("%s takes no arguments%s", fs.Name(), hint)
	}
	return nil
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
