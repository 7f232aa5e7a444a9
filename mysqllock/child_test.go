package mysqllock_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/mysqllock"
)

// childEnv, set in the environment of a re-executed test binary, makes
// TestMain run a worker instead of the tests.
const childEnv = "MYSQLLOCK_TEST_CHILD"

// runChild is a child process of the SQLite tests. "sqlite-open" opens
// MYSQLLOCK_TEST_URL and closes it. "sqlite-worker" (of
// TestSQLiteAcrossProcesses) takes the lock of MYSQLLOCK_TEST_URL
// MYSQLLOCK_TEST_ROUNDS times and, while it holds it, appends "enter" and
// "exit" lines to MYSQLLOCK_TEST_LOG.
func runChild(role string) int {
	if role == "sqlite-open" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d, err := mysqllock.Open(ctx, os.Getenv("MYSQLLOCK_TEST_URL"))
		if err == nil {
			err = d.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	if role != "sqlite-worker" {
		fmt.Fprintf(os.Stderr, "unknown child role %q\n", role)
		return 2
	}
	rounds, _ := strconv.Atoi(os.Getenv("MYSQLLOCK_TEST_ROUNDS"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := locker.Open(ctx, os.Getenv("MYSQLLOCK_TEST_URL"), locker.WithTTL(10*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	log, err := os.OpenFile(os.Getenv("MYSQLLOCK_TEST_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer log.Close()
	pid := os.Getpid()
	for range rounds {
		m := c.NewMutex("across-processes")
		if err := m.Lock(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// Each line is one write(2) on an O_APPEND file: whole lines, in
		// the order they happened.
		fmt.Fprintf(log, "enter %d %d\n", pid, m.Token())
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		fmt.Fprintf(log, "exit %d %d\n", pid, m.Token())
		if err := m.Unlock(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// TestSQLiteAcrossProcesses runs two processes (this test binary again)
// that take one lock in one SQLite file in turns: their critical sections
// never overlap and the fencing tokens grow.
func TestSQLiteAcrossProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A parent directory that does not exist yet: the driver creates it.
	url := "sqlite://" + filepath.ToSlash(filepath.Join(dir, "new", "locks.db"))
	logPath := filepath.Join(dir, "log")
	const procs, rounds = 2, 40
	ctx := drivertest.Context(t, 2*time.Minute)
	for _, err := range runChildren(ctx, procs, "sqlite-worker",
		"MYSQLLOCK_TEST_URL="+url, "MYSQLLOCK_TEST_LOG="+logPath, "MYSQLLOCK_TEST_ROUNDS="+strconv.Itoa(rounds)) {
		if err != nil {
			t.Fatalf("worker: %v", err)
		}
	}
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inside := ""
	var last uint64
	entries := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			t.Fatalf("bad line %q", sc.Text())
		}
		who := fields[1]
		tok, _ := strconv.ParseUint(fields[2], 10, 64)
		switch fields[0] {
		case "enter":
			if inside != "" {
				t.Fatalf("process %s entered while %s was inside", who, inside)
			}
			if tok <= last {
				t.Fatalf("process %s entered with token %d, not above %d", who, tok, last)
			}
			inside, last = who, tok
			entries[who]++
		case "exit":
			if inside != who {
				t.Fatalf("process %s left, but %q was inside", who, inside)
			}
			inside = ""
		}
	}
	if len(entries) != procs {
		t.Fatalf("entries by process: %v", entries)
	}
	for who, n := range entries {
		if n != rounds {
			t.Errorf("process %s entered %d times, want %d", who, n, rounds)
		}
	}
	// The file is there for the next process, with its WAL.
	d := open(t, url)
	if got := d.Dialect(); got != mysqllock.DialectSQLite {
		t.Errorf("Dialect = %q", got)
	}
}

// TestSQLiteConcurrentFirstOpen starts processes that open one new SQLite
// file at the same moment, as services started together do. Switching a
// new file to WAL takes SQLite's exclusive lock without waiting for it,
// and every open must still succeed (before openURL retried a busy file,
// about one process in a hundred failed with SQLITE_BUSY here).
func TestSQLiteConcurrentFirstOpen(t *testing.T) {
	t.Parallel()
	const files, procs = 10, 4
	ctx := drivertest.Context(t, 2*time.Minute)
	for i := range files {
		url := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "new", "locks.db"))
		for _, err := range runChildren(ctx, procs, "sqlite-open", "MYSQLLOCK_TEST_URL="+url) {
			if err != nil {
				t.Errorf("file %d: %v", i, err)
			}
		}
	}
}

// runChildren runs n copies of this test binary at once as children in
// role, with env added to their environment, and returns their errors
// (with their output) once all have exited.
func runChildren(ctx context.Context, n int, role string, env ...string) []error {
	errs := make(chan error, n)
	for range n {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
		go func() {
			out, err := cmd.CombinedOutput()
			if err != nil {
				err = fmt.Errorf("%v: %s", err, out)
			}
			errs <- err
		}()
	}
	all := make([]error, 0, n)
	for range n {
		all = append(all, <-errs)
	}
	return all
}
