package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary is lockctl when this variable is set, so the tests run
// the real command in its own process without building it.
const beMain = "LOCKCTL_TEST_BE_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(beMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// result is how a lockctl process ended.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// command returns a lockctl process with the given environment additions.
func command(t *testing.T, ctx context.Context, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), beMain+"=1", "LOCKER_URL=")
	// Keep the embedded default out of the user's cache directory.
	cache := t.TempDir()
	cmd.Env = append(cmd.Env, "XDG_CACHE_HOME="+cache, "HOME="+cache)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// lockctl runs lockctl to its end, within a minute.
func lockctl(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := command(t, ctx, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("lockctl %v: %v", args, err)
	}
	return r
}

func TestRunPassesTheExitCodeTokenAndName(t *testing.T) {
	r := lockctl(t, nil, "--url", sharedURL(t), "run", "jobs/nightly", "--", "sh", "-c", `echo "$LOCKER_LOCK_NAME $LOCKER_TOKEN"; exit 7`)
	if r.code != 7 {
		t.Fatalf("exit %d, want the command's 7; stderr: %s", r.code, r.stderr)
	}
	f := strings.Fields(r.stdout)
	if len(f) != 2 || f[0] != "jobs/nightly" {
		t.Fatalf("the command saw %q, want the lock name and a token", r.stdout)
	}
	if tok, err := strconv.ParseUint(f[1], 10, 64); err != nil || tok == 0 {
		t.Errorf("LOCKER_TOKEN = %q, want a positive fencing token", f[1])
	}
}

func TestRunReportsACommandKilledByASignal(t *testing.T) {
	r := lockctl(t, nil, "--url", sharedURL(t), "run", "l", "--", "sh", "-c", "kill -TERM $$")
	if r.code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, want %d", r.code, 128+int(syscall.SIGTERM))
	}
}

func TestBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"an unknown scheme", []string{"--url", "nope://h", "run", "l", "--", "true"}, exitUsage, `lockctl: --url: unknown backend "nope://"; lockctl supports etcd, mariadb, mongodb, mongodb+srv, mysql, postgres, postgresql, redis, redis+cluster, redis+sentinel, rediss, redlock, sqlite, zk`},
		{"a bad duration", []string{"--url", "@shared", "run", "--wait", "5x", "l", "--", "true"}, exitUsage, `bad duration "5x"`},
		{"a negative duration", []string{"--url", "@shared", "run", "--ttl", "-1s", "l", "--", "true"}, exitUsage, "negative"},
		{"a TTL too short", []string{"--url", "@shared", "run", "--ttl", "1ms", "l", "--", "true"}, exitUsage, "invalid TTL"},
		{"an empty name", []string{"--url", "@shared", "run", "", "--", "true"}, exitUsage, "empty lock name"},
		{"a missing name", []string{"--url", "@shared", "run", "--", "true"}, exitUsage, "missing lock name"},
		{"a missing command", []string{"--url", "@shared", "run", "l", "--"}, exitUsage, "missing command"},
		{"a command without --", []string{"--url", "@shared", "run", "l", "true"}, exitUsage, "after --"},
		{"an unknown subcommand", []string{"frobnicate"}, exitUsage, `unknown subcommand "frobnicate"`},
		{"an unknown flag", []string{"--url", "@shared", "run", "--wiat", "1s", "l", "--", "true"}, exitUsage, "wiat"},
		{"a command that is not found", []string{"--url", "@shared", "run", "l", "--", "/nonexistent/cmd"}, exitNoCmd, "run:"},
		{"release without --force", []string{"--url", "@shared", "release", "l"}, exitUsage, "--force"},
		{"release of a free lock", []string{"--url", "@shared", "release", "l", "--force"}, exitNotHeld, "not held: nothing to release"},
		{"an in-process backend", []string{"--url", "mem://", "list"}, exitUsage, "in-process driver cannot exclude other processes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := slices.Clone(tt.args)
			if i := slices.Index(args, "@shared"); i >= 0 {
				args[i] = sharedURL(t)
			}
			r := lockctl(t, nil, args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, tt.code, tt.want)
			}
		})
	}
}

func TestPasswordsAreNeverPrinted(t *testing.T) {
	for _, u := range []string{"nope://user:s3cretpw@host", "redis://user:s3cretpw@127.0.0.1:1/0", "mem://user:s3cretpw@x"} {
		for _, args := range [][]string{{"list"}, {"run", "l", "--", "true"}} {
			r := lockctl(t, nil, append([]string{"--url", u}, args...)...)
			if strings.Contains(r.stdout+r.stderr, "s3cretpw") {
				t.Errorf("lockctl --url %s %v printed the password: %s%s", u, args, r.stdout, r.stderr)
			}
		}
		r := lockctl(t, []string{"LOCKER_URL=" + u}, "list")
		if strings.Contains(r.stdout+r.stderr, "s3cretpw") {
			t.Errorf("LOCKER_URL=%s lockctl list printed the password: %s%s", u, r.stdout, r.stderr)
		}
	}
}

func TestBenchReportsThroughputAndFairness(t *testing.T) {
	r := lockctl(t, nil, "--url", sharedURL(t), "bench", "--workers", "4", "--duration", "300ms")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"throughput", "wait p99", "fairness"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("bench output lacks %q:\n%s", want, r.stdout)
		}
	}
}
