// Package testserver starts real servers for the tests of golocker's
// drivers. This package is the part every backend shares, and needs only
// the standard library: process supervision, free ports, environment
// variables, shared servers and the Docker fallback. Each backend has a
// package of its own, in a module of its own, so that a driver's tests,
// and hence its go.mod, need nothing but that backend's client:
//
//	srv := redisserver.Redis(t)               // standalone Redis
//	c := redisserver.RedisCluster(t)          // 3 masters
//	s := redisserver.RedisSentinel(t)         // master + replica + 3 sentinels
//	e := etcdserver.EtcdCluster(t)            // 3 etcd members
//	z := zkserver.ZooKeeperEnsemble(t)        // 3 ZooKeeper servers
//	db := sqlserver.MySQL(t)                  // a database of its own on MariaDB
//	m := mongoserver.Mongo(t)                 // a database of its own on mongod or FerretDB
//
// # Where a server comes from
//
// Each constructor tries, in order:
//
//  1. An environment variable naming a server the user already runs, such as
//     LOCKER_TEST_REDIS_ADDR=127.0.0.1:6390. Fault hooks (kill, pause, restart)
//     are not available on such servers; tests that need them skip.
//  2. The server's binary (redis-server, java with Debian's ZooKeeper jars, a
//     helper built from a module of this repository around etcd's embed
//     package), started on free loopback ports with its data and log in a
//     directory under t.TempDir(). The process runs in its own process
//     group and is killed, with everything it started, when the test ends.
//  3. A container, only when a Docker daemon answers a ping within a few
//     seconds. The container is started by the dockerhelper command (a
//     module of its own around testcontainers-go, built on first use), so
//     that no driver's go.mod lists testcontainers or Docker's client.
//  4. Otherwise the test is skipped with a message naming what to install
//     (scripts/install-test-deps.sh installs everything). When the
//     environment variable LOCKER_REQUIRE_SERVERS=1 is set, as CI does, the
//     skip becomes a failure.
//
// docs/testing.md lists every environment variable and its format.
//
// # Servers shared by a package's tests
//
// Starting a server per test is simple and isolates tests, but a Redis
// Cluster or a ZooKeeper ensemble takes seconds to start. A package can share
// one across its tests with a Shared (the package-wide TB whose cleanups run
// after the last test) and a Lazy per server, which starts on the first test
// that asks for it and never if no test does:
//
//	var servers testserver.Shared
//
//	var cluster = testserver.NewLazy(&servers, redisserver.RedisCluster)
//
//	func TestMain(m *testing.M) { os.Exit(servers.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		c := cluster.Get(t) // skips or fails t as the start did
//		...
//	}
//
// A package whose every test needs the same servers can instead start them
// all before the tests with Main(m, setup).
//
// # Tests, races and leaks
//
// Every wait in this package is bounded by a deadline; readiness is polled,
// never assumed after a fixed sleep. Servers bind only to 127.0.0.1.
package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireServersEnv is the environment variable that, set to 1 or true,
// turns every skip for want of a server into a test failure. CI sets it.
const RequireServersEnv = "LOCKER_REQUIRE_SERVERS"

// TB is the part of testing.TB the package needs; *testing.T, *testing.B
// and *Shared satisfy it.
type TB interface {
	Helper()
	Cleanup(func())
	Logf(format string, args ...any)
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
	TempDir() string
	Failed() bool
	Name() string
}

// ServersRequired reports whether LOCKER_REQUIRE_SERVERS asks for a missing
// server to fail the test instead of skipping it.
func ServersRequired() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(RequireServersEnv))) {
	case "1", "true", "yes":
		return true
	}
	return false
}

// Unavailable reports that a backend cannot be had: t.Skipf with the
// message, which should name what to install, or t.Fatalf when
// LOCKER_REQUIRE_SERVERS=1.
func Unavailable(t TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if ServersRequired() {
		t.Fatalf("testserver: %s (failing instead of skipping because %s is set)", msg, RequireServersEnv)
		return
	}
	t.Skipf("testserver: %s (set %s=1 to make this a failure)", msg, RequireServersEnv)
}

// EnvAddr returns the value of an environment variable naming an
// already-running server (e.g. LOCKER_TEST_REDIS_ADDR), with surrounding
// space removed, or "" if it is unset.
func EnvAddr(name string) string {
	return strings.TrimSpace(os.Getenv(name))
}

// EnvAddrs splits the value of an environment variable holding a
// comma-separated list of addresses, dropping empty items. It returns nil if
// the variable is unset or empty.
func EnvAddrs(name string) []string {
	var out []string
	for _, s := range strings.Split(EnvAddr(name), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// LookPath returns the path of the first of names found in PATH or in the
// extra directories, or "" when none is.
func LookPath(names []string, extraDirs ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
		for _, d := range extraDirs {
			p := d + string(os.PathSeparator) + n
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				return p
			}
		}
	}
	return ""
}

// CheckEnvServer fails the test when a server named by an environment
// variable does not accept connections: the user asked for it, so a skip
// would hide a broken setup.
func CheckEnvServer(t TB, env, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := WaitTCP(ctx, addr); err != nil {
		t.Fatalf("testserver: %s=%s: %v", env, addr, err)
	}
}

// CheckEnvServers is CheckEnvServer for each of addrs, which env names; an
// address may start with a scheme ("http://").
func CheckEnvServers(t TB, env string, addrs []string) {
	t.Helper()
	for _, a := range addrs {
		if _, rest, ok := strings.Cut(a, "://"); ok {
			a = rest
		}
		CheckEnvServer(t, env, a)
	}
}

// PollUntil calls f every 100ms until it returns nil or ctx ends, and then
// returns f's last error.
func PollUntil(ctx context.Context, f func(context.Context) error) error {
	return PollEvery(ctx, 100*time.Millisecond, f)
}

// PollEvery calls f every interval until it returns nil or ctx ends, and
// then returns f's last error.
func PollEvery(ctx context.Context, interval time.Duration, f func(context.Context) error) error {
	_, err := PollFor(ctx, interval, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
	return err
}

// WaitFor is PollEvery whose error, when ctx ends first, starts with
// failure: "redis cluster not healthy: ...".
func WaitFor(ctx context.Context, interval time.Duration, failure string, f func(context.Context) error) error {
	if err := PollEvery(ctx, interval, f); err != nil {
		return fmt.Errorf("%s: %w", failure, err)
	}
	return nil
}

// PollFor calls f every interval until it returns no error or ctx ends,
// and then returns f's last result.
func PollFor[T any](ctx context.Context, interval time.Duration, f func(context.Context) (T, error)) (T, error) {
	for {
		v, err := f(ctx)
		if err == nil {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(interval):
		}
	}
}

// FindLeader asks the members whose process (proc) runs, in turn, and
// returns the first for which leads returns nil. Otherwise its error,
// "KIND leader: ...", wraps the last member's reason for not leading.
func FindLeader[M any](ctx context.Context, kind string, members []M, proc func(M) *Process, leads func(context.Context, M) error) (M, error) {
	last := errors.New("no running member")
	for _, m := range members {
		if !proc(m).Running() {
			continue
		}
		if last = leads(ctx, m); last == nil {
			return m, nil
		}
	}
	var none M
	return none, fmt.Errorf("%s leader: %w", kind, last)
}

// Race runs attempt(i) for each i below n, all released at once, and
// returns how many succeeded and every error. Each error for which lost is
// false, something other than losing the race, goes to report.
func Race(n int, attempt func(i int) error, lost func(error) bool, report func(i int, err error)) (wins int, errs []error) {
	start := make(chan struct{})
	errs = make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = attempt(i)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		switch {
		case err == nil:
			wins++
		case !lost(err):
			report(i, err)
		}
	}
	return wins, errs
}

// Shared is a TB for servers shared by all the tests of a package. Its zero
// value is ready to use; its Main method runs the package's tests and then
// the cleanups registered on it, last first. Skipf and Fatalf end only the
// function they are called from (a Lazy start or Main's setup), which must
// therefore run through Lazy.Get, Main or Shared.Run, never on a test's own
// goroutine.
type Shared struct {
	mu       sync.Mutex
	running  bool
	failed   bool
	cleanups []func()
	logs     []string
}

var _ TB = (*Shared)(nil)

// Helper does nothing; it is there to satisfy TB.
func (s *Shared) Helper() {}

// Name returns "TestMain".
func (s *Shared) Name() string { return "TestMain" }

// Cleanup registers f to run when Main ends, after every test.
func (s *Shared) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

// Logf records a line; the lines are printed to standard error when Main
// ends, if a test failed or go test runs with -v.
func (s *Shared) Logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logs = append(s.logs, fmt.Sprintf(format, args...))
}

// Skipf records the message and ends the calling goroutine, as
// testing.T.Skipf does.
func (s *Shared) Skipf(format string, args ...any) {
	s.Logf("SKIP: "+format, args...)
	runtime.Goexit()
}

// Fatalf records the message, marks the package failed and ends the calling
// goroutine, as testing.T.Fatalf does.
func (s *Shared) Fatalf(format string, args ...any) {
	s.Logf("FATAL: "+format, args...)
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
	runtime.Goexit()
}

// Failed reports whether Fatalf was called or, once the tests have run,
// whether any test failed.
func (s *Shared) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// TempDir creates a new directory that is removed when Main ends.
func (s *Shared) TempDir() string {
	dir, err := s.tempDir()
	if err != nil {
		s.Fatalf("testserver: TempDir: %v", err)
	}
	return dir
}

func (s *Shared) tempDir() (string, error) {
	dir, err := os.MkdirTemp("", "golocker-testserver-")
	if err != nil {
		return "", err
	}
	s.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir, nil
}

// Outcome is how a function run by Shared.Run ended.
type Outcome struct {
	Skipped bool   // Skipf was called
	Failed  bool   // Fatalf was called
	Message string // the Skipf or Fatalf message, "" if neither was called
}

// Run calls f on a new goroutine with a TB that shares s's cleanups and
// logs, so that Skipf and Fatalf end f only, and reports how f ended.
func (s *Shared) Run(f func(t TB)) Outcome {
	r := &sharedRun{Shared: s}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
		r.returned = true
	}()
	<-done
	if !r.returned && !r.out.Skipped && !r.out.Failed {
		return Outcome{Failed: true, Message: "setup ended without returning, skipping or failing (runtime.Goexit?)"}
	}
	return r.out
}

// sharedRun is the TB of one Shared.Run: it remembers how the run ended.
// Its fields are written on the run's goroutine and read after it ends.
type sharedRun struct {
	*Shared
	out      Outcome
	returned bool
}

func (r *sharedRun) Skipf(format string, args ...any) {
	r.out = Outcome{Skipped: true, Message: fmt.Sprintf(format, args...)}
	r.Shared.Skipf(format, args...)
}

func (r *sharedRun) TempDir() string {
	dir, err := r.tempDir()
	if err != nil {
		r.Fatalf("testserver: TempDir: %v", err)
	}
	return dir
}

func (r *sharedRun) Fatalf(format string, args ...any) {
	r.out = Outcome{Failed: true, Message: fmt.Sprintf(format, args...)}
	r.Shared.Fatalf(format, args...)
}

// Main runs the tests of m and then the cleanups registered on s, and
// returns the exit code for os.Exit. Call it from TestMain.
func (s *Shared) Main(m *testing.M) int {
	s.mu.Lock()
	s.running = true
	s.mu.Unlock()
	code := m.Run()
	if code != 0 {
		s.mu.Lock()
		s.failed = true
		s.mu.Unlock()
	}
	s.Close()
	s.flushLogs(code != 0 || testing.Verbose())
	return code
}

// Close runs the registered cleanups, last first. Main calls it; call it
// yourself only when not using Main.
func (s *Shared) Close() {
	for i := 0; ; i++ {
		s.mu.Lock()
		n := len(s.cleanups)
		if n == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		f := s.cleanups[n-1]
		s.cleanups = s.cleanups[:n-1]
		s.mu.Unlock()
		f()
	}
}

func (s *Shared) flushLogs(print bool) {
	s.mu.Lock()
	logs := s.logs
	s.logs = nil
	s.mu.Unlock()
	if !print {
		return
	}
	for _, l := range logs {
		fmt.Fprintf(os.Stderr, "testserver (shared): %s\n", l)
	}
}

// Main starts servers for every test of a package before running them:
// call it from TestMain as os.Exit(testserver.Main(m, setup)). setup gets a
// package-wide TB on which the servers register their cleanups, which run
// after the last test. If setup skips (a server is unavailable), no test
// runs and Main returns 0 after printing why; if it fails, Main returns 1.
// Prefer Shared and Lazy when only some tests need the servers.
func Main(m *testing.M, setup func(t TB)) int {
	var s Shared
	if setup != nil {
		out := s.Run(setup)
		if out.Skipped || out.Failed {
			s.Close()
			s.flushLogs(true)
			fmt.Fprintf(os.Stderr, "testserver: TestMain setup did not complete: %s\n", out.Message)
			if out.Failed {
				return 1
			}
			return 0
		}
	}
	return s.Main(m)
}

// Lazy is a value, usually a server, started for the tests of a package by
// the first test that asks for it and shared by all of them. See NewLazy.
type Lazy[T any] struct {
	shared *Shared
	start  func(t TB) T
	once   sync.Once
	val    T
	out    Outcome
}

// NewLazy returns a Lazy whose start function runs with s as its TB the
// first time Get is called. s.Main must run the package's tests, so that
// what start registered is cleaned up after the last test.
func NewLazy[T any](s *Shared, start func(t TB) T) *Lazy[T] {
	return &Lazy[T]{shared: s, start: start}
}

// Get returns the value, starting it on the first call. If the start
// skipped or failed, Get skips or fails t with the same message, on every
// call.
func (l *Lazy[T]) Get(t TB) T {
	t.Helper()
	l.shared.mu.Lock()
	running := l.shared.running
	l.shared.mu.Unlock()
	if !running {
		t.Fatalf("testserver: Lazy.Get called outside Shared.Main; call os.Exit(shared.Main(m)) in TestMain")
		var zero T
		return zero
	}
	l.once.Do(func() {
		l.out = l.shared.Run(func(st TB) { l.val = l.start(st) })
	})
	switch {
	case l.out.Failed:
		t.Fatalf("testserver: shared server failed to start: %s", l.out.Message)
	case l.out.Skipped:
		t.Skipf("%s", l.out.Message)
	}
	return l.val
}
