package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTheDemo builds the program and runs it as `make demo` does, outside
// a test binary, and wants the verdict OK: the frozen worker's stale write
// refused.
func TestTheDemo(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building the demo needs the go command: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "demo")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		// The packages this test was built from are compiled already.
		args = append(args, "-race")
	}
	if out, err := exec.CommandContext(ctx, goCmd, append(args, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	out := stdout.String()
	if err != nil || !strings.Contains(out, "verdict: OK") || !strings.Contains(out, "REFUSED") || !strings.Contains(out, "SIGSTOP worker-1") {
		t.Fatalf("the demo ended with %v, want status 0, a frozen worker, a refused write and verdict OK\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
}
