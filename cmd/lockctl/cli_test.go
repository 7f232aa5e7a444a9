package main

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestHelp: `lockctl CMD --help` exits 0 and lists every flag of CMD.
func TestHelp(t *testing.T) {
	want := map[string][]string{
		"run":     {"-wait", "-ttl", "-grace", "-quiet", "-url"},
		"list":    {"-prefix", "-json"},
		"release": {"-force"},
		"bench":   {"-workers", "-duration", "-hold", "-think", "-name"},
		"serve":   {"-addr", "-read-only", "-token-env", "-basic-auth-env", "-prefix"},
	}
	for cmd, flags := range want {
		for _, args := range [][]string{{cmd, "--help"}, {cmd, "-h"}, {"help", cmd}} {
			r := lockctl(t, nil, args...)
			if r.code != 0 {
				t.Errorf("lockctl %v: exit %d, stderr %q; want 0", args, r.code, r.stderr)
				continue
			}
			if !strings.HasPrefix(r.stdout, "usage: lockctl") {
				t.Errorf("lockctl %v: stdout %q does not start with the usage", args, r.stdout)
			}
			for _, f := range flags {
				if !strings.Contains(r.stdout, "  "+f) {
					t.Errorf("lockctl %v does not list %s:\n%s", args, f, r.stdout)
				}
			}
		}
	}
	if r := lockctl(t, nil, "--help"); r.code != 0 || !strings.Contains(r.stdout, "CMD --help") {
		t.Errorf("lockctl --help: exit %d, stdout %q", r.code, r.stdout)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := lockctl(t, nil, args...)
		if r.code != 0 || !regexp.MustCompile(`^lockctl \S+ go1\.`).MatchString(r.stdout) {
			t.Errorf("lockctl %v: exit %d, stdout %q; want 0 and the version", args, r.code, r.stdout)
		}
	}
}

// TestTheDefaultBackendIsNamed: without --url or $LOCKER_URL, lockctl
// names the backend it uses on stderr when it creates it, and when list or
// release find nothing there; otherwise it says nothing about it.
func TestTheDefaultBackendIsNamed(t *testing.T) {
	cache := []string{"XDG_CACHE_HOME=" + t.TempDir()} // one for every call
	named := regexp.MustCompile(`default backend sqlite:///\S+/golocker/lockctl\.db`)
	r := lockctl(t, cache, "run", "l", "--", "true")
	if r.code != 0 || !named.MatchString(r.stderr) || !strings.Contains(r.stderr, "created") {
		t.Errorf("the first run: exit %d, stderr %q; want 0 and the default backend named as created", r.code, r.stderr)
	}
	r = lockctl(t, cache, "run", "l", "--", "true")
	if r.code != 0 || r.stderr != "" {
		t.Errorf("the second run: exit %d, stderr %q; want 0 and nothing on stderr", r.code, r.stderr)
	}
	r = lockctl(t, cache, "list")
	if r.code != 0 || !named.MatchString(r.stderr) || !strings.Contains(r.stderr, "no holds") {
		t.Errorf("list of no holds: exit %d, stderr %q; want 0, and no holds on the default backend", r.code, r.stderr)
	}
	r = lockctl(t, cache, "release", "--force", "l")
	if r.code != exitNotHeld || !named.MatchString(r.stderr) {
		t.Errorf("release of a free lock: exit %d, stderr %q; want %d, naming the default backend", r.code, r.stderr, exitNotHeld)
	}
	u := sharedURL(t)
	for _, args := range [][]string{{"run", "l", "--", "true"}, {"list"}, {"release", "--force", "l"}} {
		r = lockctl(t, cache, append([]string{"--url", u}, args...)...)
		if strings.Contains(r.stderr, "default backend") {
			t.Errorf("lockctl --url … %v named the default backend: %q", args, r.stderr)
		}
	}
}

// TestAHeldLockNamesItsHolder: a second run that finds the lock held says
// who holds it, with the token and the time left.
func TestAHeldLockNamesItsHolder(t *testing.T) {
	url := sharedURL(t)
	holder(t, url, []string{"--ttl", "30s", "busy"}, "echo ready; "+whileLockctlRuns)
	r := lockctl(t, nil, "--url", url, "run", "--wait", "0", "busy", "--", "true")
	if r.code != exitHeld || !regexp.MustCompile(`held by another owner \(owner \S+/\d+/\S+, token \d+, [0-9.]+m?s left\)`).MatchString(r.stderr) {
		t.Errorf("exit %d, stderr %q; want %d naming the holder", r.code, r.stderr, exitHeld)
	}
}

// TestAForcedReleaseIsNoticedWithinASecond: run checks its hold every
// second, so a release by force ends the command long before the next
// renewal of a 60 s lease (at 20 s) would have noticed it, and run exits
// 125 saying when and how.
func TestAForcedReleaseIsNoticedWithinASecond(t *testing.T) {
	url := sharedURL(t)
	cmd, errb := holder(t, url, []string{"--ttl", "60s", "--grace", "1s", "job"}, "echo ready; sleep 60")
	released := time.Now()
	if r := lockctl(t, nil, "--url", url, "release", "--force", "job"); r.code != 0 {
		t.Fatalf("release --force: exit %d, %s", r.code, r.stderr)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done // one Wait at a time: the cleanup's comes after this one
		t.Fatalf("run did not end within 15 s of the forced release (the next renewal is 20 s away); stderr: %s", errb)
	}
	t.Logf("run ended %v after the forced release", time.Since(released).Round(time.Millisecond))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitLost {
		t.Fatalf("run ended with %v, want exit %d; stderr: %s", err, exitLost, errb)
	}
	if !regexp.MustCompile(`the hold on "job" was lost at \d\d:\d\d:\d\d\.\d+, [0-9.]+m?s after it was taken, while the command ran: hold lost: a renewal found the hold gone`).MatchString(errb.String()) {
		t.Errorf("stderr %q does not say when and how the hold was lost", errb)
	}
}

// TestAHoldFoundLostAtTheEndExits125: the command ends before anything
// noticed the forced release; the final release finds the hold gone, and
// run says so with 125 instead of the command's 0.
func TestAHoldFoundLostAtTheEndExits125(t *testing.T) {
	url := sharedURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The command waits for a file that the test writes after the forced
	// release, then ends at once: well within run's one-second check.
	gate := t.TempDir() + "/go"
	cmd, errb := holder(t, url, []string{"--ttl", "60s", "short"}, `echo ready; while [ ! -e `+gate+` ]; do sleep 0.01; done`)
	if r := lockctl(t, nil, "--url", url, "release", "--force", "short"); r.code != 0 {
		t.Fatalf("release --force: exit %d, %s", r.code, r.stderr)
	}
	if err := exec.CommandContext(ctx, "touch", gate).Run(); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitLost {
		t.Fatalf("run ended with %v, want exit %d; stderr: %s", err, exitLost, errb)
	}
	if !strings.Contains(errb.String(), "lost") {
		t.Errorf("stderr %q does not say the hold was lost", errb)
	}
}

// TestLongNamesAreCut: a name of 10 KB, or a valid one of 512 bytes, is
// shown by its first bytes and its length in lockctl's messages.
func TestLongNamesAreCut(t *testing.T) {
	url := sharedURL(t)
	r := lockctl(t, nil, "--url", url, "run", strings.Repeat("x", 10*1024), "--", "true")
	if r.code != exitUsage || !strings.Contains(r.stderr, "invalid lock name: 10240 bytes") || !strings.Contains(r.stderr, `…" (10240 bytes)`) || len(r.stderr) > 300 {
		t.Errorf("run with a 10 KB name: exit %d, %d bytes on stderr: %.400q; want %d, cut, at most 300 bytes", r.code, len(r.stderr), r.stderr, exitUsage)
	}
	name := "jobs/" + strings.Repeat("y", 507)
	holder(t, url, []string{"--ttl", "30s", name}, "echo ready; "+whileLockctlRuns)
	r = lockctl(t, nil, "--url", url, "run", "--wait", "0", name, "--", "true")
	if r.code != exitHeld || !strings.Contains(r.stderr, `…" (512 bytes) is held by another owner (owner`) || len(r.stderr) > 400 {
		t.Errorf("run of a held 512-byte name: exit %d, %d bytes on stderr: %.600q; want %d, cut, at most 400 bytes", r.code, len(r.stderr), r.stderr, exitHeld)
	}
}
