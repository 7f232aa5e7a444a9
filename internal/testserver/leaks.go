package testserver

// Checks that a server leaves nothing running behind it, for the tests of
// this package and of the server packages (redisserver, sqlserver, ...).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tracker remembers the processes a package's tests started, so that its
// TestMain can check with AllGone that none of them outlived the tests. Its
// zero value is ready to use.
type Tracker struct {
	mu    sync.Mutex
	procs []*Process
}

// Track adds procs to the processes AllGone checks.
func (tr *Tracker) Track(procs ...*Process) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.procs = append(tr.procs, procs...)
}

// AllGone returns an error naming every tracked process group that still
// has live members.
func (tr *Tracker) AllGone() error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var errs []error
	for _, p := range tr.procs {
		errs = append(errs, ProcessGone(p))
	}
	return errors.Join(errs...)
}

// WithServers runs start in a subtest named "run", tracks the processes it
// returns and runs use in the same subtest. Once that subtest and its
// cleanups are over, it checks that every one of those processes is gone.
// It logs how long start took.
func (tr *Tracker) WithServers(t *testing.T, start func(t *testing.T) []*Process, use func(t *testing.T)) {
	t.Helper()
	var procs []*Process
	t.Run("run", func(t *testing.T) {
		begin := time.Now()
		procs = start(t)
		t.Logf("started %d process(es) in %v", len(procs), time.Since(begin).Round(time.Millisecond))
		tr.Track(procs...)
		use(t)
	})
	for _, p := range procs {
		if err := ProcessGone(p); err != nil {
			t.Errorf("after teardown: %v", err)
		}
	}
}

// RunServer runs test in a parallel subtest named name, against the
// server start returns, through tr.WithServers: procs names the processes
// of that server, which must all be gone once the subtest is over. It is
// the shape of every subtest in the server packages' own tests.
func RunServer[S any](t *testing.T, tr *Tracker, name string, start func(TB) S, procs func(S) []*Process, test func(t *testing.T, s S)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		var s S
		tr.WithServers(t, func(t *testing.T) []*Process {
			s = start(t)
			return procs(s)
		}, func(t *testing.T) { test(t, s) })
	})
}

// ProcessesOf returns the processes proc finds in members, leaving out
// nil ones: a member that an environment variable or a container named has
// no process of ours.
func ProcessesOf[M any](members []M, proc func(M) *Process) []*Process {
	var out []*Process
	for _, m := range members {
		if p := proc(m); p != nil {
			out = append(out, p)
		}
	}
	return out
}

// ProcessGone reports an error if a process group that p started (its
// leader or anything the leader started) still has live members.
func ProcessGone(p *Process) error {
	var errs []error
	for _, pid := range p.StartedPIDs() {
		if m := GroupMembers(pid); len(m) > 0 {
			errs = append(errs, fmt.Errorf("%s: process group %d still has live members %v", p.Name(), pid, m))
		}
	}
	return errors.Join(errs...)
}

// ServerTrace is what a test remembers of a server to check, after the
// server's test has ended, that nothing it started still runs, even a
// child that left the server's process group.
type ServerTrace struct {
	groups []int  // process groups (= pids) of the server's runs
	dir    string // the server's directory; its children work inside it
}

// TraceOf returns the trace of the server process p, which may be nil (a
// server this package did not start: nothing to check).
func TraceOf(p *Process) ServerTrace {
	if p == nil {
		return ServerTrace{}
	}
	return ServerTrace{groups: p.StartedPIDs(), dir: p.Dir()}
}

// RequireProcsGone fails t if any process of the traced server, found by
// process group or by a working directory inside the server's directory,
// is still running a few seconds after the server's test ended. Zombies
// count as gone: only their parent can reap them.
func RequireProcsGone(t *testing.T, tr ServerTrace) {
	t.Helper()
	if len(tr.groups) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := PollUntil(ctx, func(context.Context) error {
		if left := Leftovers(tr); len(left) > 0 {
			return fmt.Errorf("still running: pids %v", left)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("server processes left behind: %v", err)
	}
}

// Leftovers returns the pids of live, non-zombie processes of the traced
// server, read from /proc.
func Leftovers(tr ServerTrace) []int {
	groups := map[int]bool{}
	for _, g := range tr.groups {
		groups[g] = true
	}
	return liveProcs(func(pid int, st procStat) bool {
		if groups[st.pgrp] {
			return true
		}
		cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
		return err == nil && tr.dir != "" && (cwd == tr.dir || strings.HasPrefix(cwd, tr.dir+"/"))
	})
}

// CheckEnvErrorHidesPassword sets env to value, which names an unreachable
// or malformed server with the password "sekrit-pw", and checks that start
// fails (it must not skip or start a server of its own) without the
// password in its message.
func CheckEnvErrorHidesPassword(t *testing.T, env, value string, start func(TB)) {
	t.Helper()
	t.Setenv(env, value)
	var s Shared
	defer s.Close()
	out := s.Run(start)
	if !out.Failed {
		t.Fatalf("start with %s=%s: %+v, want a failure", env, value, out)
	}
	if strings.Contains(out.Message, "sekrit-pw") {
		t.Fatalf("the failure quotes the password: %s", out.Message)
	}
	t.Logf("failure: %s", out.Message)
}

// MainChecked runs a backend package's tests, then, if they passed, fails
// the run when leaks finds goroutines left running (goleak.Find: the core
// takes it as a function so that it needs the standard library only) or a
// server process the tests started outlived them. Use it as
//
//	func TestMain(m *testing.M) {
//		os.Exit(tracked.MainChecked(m, func() error { return goleak.Find() }))
//	}
func (t *Tracker) MainChecked(m *testing.M, leaks func() error) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	if err := leaks(); err != nil {
		fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
		code = 1
	}
	if err := t.AllGone(); err != nil {
		fmt.Fprintf(os.Stderr, "leftover processes: %v\n", err)
		code = 1
	}
	return code
}
