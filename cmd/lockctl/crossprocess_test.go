package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/testserver/redisserver"
)

// sharedURL is a backend that several lockctl processes share: a SQLite file.
func sharedURL(t *testing.T) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "locks.db")
}

// whileLockctlRuns is a holder's script that ends soon after the lockctl
// that runs it: a cleanup that kills lockctl then waits for its output
// without waiting for a long sleep too.
const whileLockctlRuns = "while kill -0 $PPID 2>/dev/null; do sleep 0.1; done"

// holder starts `lockctl run NAME -- CMD` in the background and waits until
// its command has printed "ready".
func holder(t *testing.T, url string, runArgs []string, script string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	args := append(append([]string{"--url", url, "run"}, runArgs...), "--", "sh", "-c", script)
	cmd := command(t, ctx, nil, args...)
	errb := &syncBuffer{}
	cmd.Stderr = errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case <-ready:
	case <-time.After(time.Minute):
		t.Fatalf("the command under lockctl did not start; stderr: %s", errb.String())
	}
	return cmd, errb
}

// syncBuffer is a bytes.Buffer that a process writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// exitCode waits for cmd and returns its exit status, within d.
func exitCode(t *testing.T, cmd *exec.Cmd, d time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done // one Wait at a time: the cleanup's comes after this one
		t.Fatalf("lockctl did not exit within %v", d)
		return -1
	}
}

const loop = `trap 'echo got TERM >&2; exit 42' TERM; echo ready; while :; do sleep 0.05; done`

func TestRunWhenHeldElsewhere(t *testing.T) {
	u := sharedURL(t)
	h, _ := holder(t, u, []string{"busy"}, loop)

	r := lockctl(t, nil, "--url", u, "run", "--wait", "0", "busy", "--", "true")
	if r.code != exitHeld || !strings.Contains(r.stderr, "held by another owner") {
		t.Errorf("--wait 0: exit %d %q, want %d", r.code, r.stderr, exitHeld)
	}
	r = lockctl(t, nil, "--url", u, "run", "--wait", "300ms", "busy", "--", "true")
	if r.code != exitTimeout || r.took < 300*time.Millisecond {
		t.Errorf("--wait 300ms: exit %d after %v (%q), want %d after at least 300ms", r.code, r.took, r.stderr, exitTimeout)
	}
	r = lockctl(t, nil, "--url", u, "list", "--json")
	var holds []holdJSON
	if err := json.Unmarshal([]byte(r.stdout), &holds); err != nil || len(holds) != 1 || holds[0].Name != "busy" || holds[0].Token == 0 {
		t.Errorf("list --json = %q (%v), want the one hold with its token", r.stdout, err)
	}
	_ = h.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, h, 30*time.Second); code != 42 {
		t.Errorf("the holder exited %d after SIGTERM, want the command's 42 (the signal is forwarded)", code)
	}
	r = lockctl(t, nil, "--url", u, "run", "--wait", "0", "busy", "--", "true")
	if r.code != 0 {
		t.Errorf("after the holder ended, run --wait 0 = exit %d %q: the lock was not released", r.code, r.stderr)
	}
}

func TestRunTerminatesTheCommandWhenTheHoldIsLost(t *testing.T) {
	u := sharedURL(t)
	h, stderr := holder(t, u, []string{"--ttl", "600ms", "--grace", "5s", "doomed"}, loop)
	r := lockctl(t, nil, "--url", u, "release", "--force", "doomed")
	if r.code != 0 {
		t.Fatalf("release --force: exit %d %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "next renewal") {
		t.Errorf("release --force on SQLite said %q; want it to say the holder learns at its next renewal", r.stdout)
	}
	if code := exitCode(t, h, 30*time.Second); code != exitLost {
		t.Errorf("exit %d, want %d; stderr: %s", code, exitLost, stderr)
	}
	if !strings.Contains(stderr.String(), "got TERM") || !strings.Contains(stderr.String(), "lost") {
		t.Errorf("stderr %q: want the command to get SIGTERM and lockctl to say the hold was lost", stderr)
	}
}

// TestRunOnRedisSignalsTheCommandBeforeAnotherRunHolds: on a Redis that
// publishes keyspace events, a release by force reaches the holder through
// Redis. Released just after a renewal of the hold, which a renewal would
// find only a second later (lockctl run renews every second), the
// holder's command gets SIGTERM within half of that, and before a second
// lockctl run, started once the release has returned, runs its command
// under the lock. The times are the commands' own: the trap's, which
// interrupts a wait, and the second command's start.
func TestRunOnRedisSignalsTheCommandBeforeAnotherRunHolds(t *testing.T) {
	srv := redisserver.RedisWith(t, redisserver.RedisOptions{Args: []string{"--notify-keyspace-events", "Kgx"}})
	u := "redis://" + srv.Addr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	termed, second := filepath.Join(dir, "termed"), filepath.Join(dir, "second")
	script := `trap "date +%s%N > '` + termed + `'; exit 42" TERM; echo ready; while :; do sleep 1 & wait $!; done`
	h, stderr := holder(t, u, []string{"--ttl", "60s", "--grace", "5s", "doomed"}, script)

	admin, err := locker.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	// A renewal sets the key's lease back to 60s: release right after one.
	pttl := func() int64 {
		r, err := srv.Do(ctx, "PTTL", "golocker:{doomed}")
		if err != nil {
			t.Fatal(err)
		}
		return r.(int64)
	}
	prev := pttl()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("no renewal of the hold within 10s")
		}
		time.Sleep(5 * time.Millisecond)
		cur := pttl()
		if cur > prev {
			break
		}
		prev = cur
	}
	if err := admin.ForceRelease(ctx, "doomed"); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	r := lockctl(t, nil, "--url", u, "run", "--wait", "0", "doomed", "--", "sh", "-c", `date +%s%N > '`+second+`'`)
	if r.code != 0 {
		t.Fatalf("the second run: exit %d %s", r.code, r.stderr)
	}
	if code := exitCode(t, h, 30*time.Second); code != exitLost {
		t.Errorf("the holder exited %d, want %d; stderr: %s", code, exitLost, stderr)
	}
	at := func(path string) time.Time {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return time.Unix(0, n)
	}
	term, start := at(termed), at(second)
	t.Logf("SIGTERM %v after the release returned, %v before the second run's command started", term.Sub(released), start.Sub(term))
	if term.After(released.Add(checkEvery / 2)) {
		t.Errorf("the command got SIGTERM %v after the release: not pushed (a renewal would find it %v after the last)", term.Sub(released), checkEvery)
	}
	if !term.Before(start) {
		t.Errorf("the holder's command got SIGTERM %v after the second run's command started", term.Sub(start))
	}

	// release --force says that the holder is told at once.
	m := admin.NewMutex("again")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if r := lockctl(t, nil, "--url", u, "release", "--force", "again"); r.code != 0 || !strings.Contains(r.stdout, "at once") {
		t.Errorf("release --force: exit %d, stdout %q, stderr %q; want it to say the holder is told at once", r.code, r.stdout, r.stderr)
	}
}

func TestRunKillsACommandThatIgnoresSIGTERM(t *testing.T) {
	u := sharedURL(t)
	h, stderr := holder(t, u, []string{"--ttl", "600ms", "--grace", "300ms", "stubborn"}, `trap '' TERM; echo ready; while :; do sleep 0.05; done`)
	if r := lockctl(t, nil, "--url", u, "release", "--force", "stubborn"); r.code != 0 {
		t.Fatalf("release --force: exit %d %s", r.code, r.stderr)
	}
	if code := exitCode(t, h, 30*time.Second); code != exitLost {
		t.Errorf("exit %d, want %d; stderr: %s", code, exitLost, stderr)
	}
}

func TestDemoEndsWithAVerdict(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	r := lockctl(t, nil, "demo")
	if r.code != 0 || !strings.Contains(r.stdout, "verdict: OK") || !strings.Contains(r.stdout, "REFUSED") {
		t.Fatalf("demo: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
