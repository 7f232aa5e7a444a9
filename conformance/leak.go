package conformance

import (
	"bytes"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// goroutines returns the ids of the process's goroutines, and a line of
// each one's stack, for settleGoroutines.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	gs := make(map[string]string)
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		head, rest, _ := strings.Cut(string(g), "\n")
		// "goroutine 42 [running]:"
		f := strings.Fields(head)
		if len(f) < 2 || f[0] != "goroutine" {
			continue
		}
		fn, _, _ := strings.Cut(rest, "\n")
		gs[f[1]] = fn
	}
	return gs
}

// settleGoroutines fails the check if, a few seconds on, more goroutines
// run a function than ran it at before: what the check ended left
// something behind. It counts by function, not by goroutine: a goroutine
// that replaced one of the same function is no growth (a pooled
// connection that a cancelled query closed, and the one opened after it,
// each have a watcher goroutine of the database driver). It is the check of
// goleak, with the standard library only, so that the root module needs
// nothing else.
func settleGoroutines(t *testing.T, before map[string]string, what string) {
	t.Helper()
	var extra []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		extra = grown(before, goroutines())
		if len(extra) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(extra) > 10 {
		extra = append(extra[:10], "...")
	}
	t.Errorf("%s: %d goroutine(s) more than before are running:\n%s", what, len(extra), strings.Join(extra, "\n"))
}

// grown returns the goroutines of now (id: top function) that are not in
// before and run a function that more goroutines run now than in before,
// sorted; benign ones aside.
func grown(before, now map[string]string) []string {
	had, count := make(map[string]int), make(map[string]int)
	for _, fn := range before {
		had[fn]++
	}
	for _, fn := range now {
		count[fn]++
	}
	var extra []string
	for id, fn := range now {
		if _, ok := before[id]; ok || benign(fn) || count[fn] <= had[fn] {
			continue
		}
		extra = append(extra, "goroutine "+id+": "+fn)
	}
	slices.Sort(extra)
	return extra
}

// benign tells whether a goroutine whose top frame is fn belongs to the
// runtime or the test framework rather than to what a check started.
func benign(fn string) bool {
	for _, p := range []string{"testing.", "os/signal.", "runtime.ensureSigM"} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}
