package testserver

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// servers holds the servers shared by this package's tests (see NewLazy).
var servers Shared

func TestMain(m *testing.M) {
	code := servers.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
		if err := allProcessesGone(); err != nil {
			fmt.Fprintf(os.Stderr, "leftover processes: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// started records every Process the tests started, for the final check.
var started struct {
	sync.Mutex
	procs []*Process
}

func track(procs ...*Process) {
	started.Lock()
	defer started.Unlock()
	started.procs = append(started.procs, procs...)
}

func allProcessesGone() error {
	started.Lock()
	defer started.Unlock()
	var errs []error
	for _, p := range started.procs {
		errs = append(errs, processGone(p))
	}
	return errors.Join(errs...)
}

// processGone reports an error if a process group that p started (its
// leader or anything the leader started) still has live members.
func processGone(p *Process) error {
	var errs []error
	for _, pid := range p.startedPIDs() {
		if m := groupMembers(pid); len(m) > 0 {
			errs = append(errs, fmt.Errorf("%s: process group %d still has live members %v", p.Name(), pid, m))
		}
	}
	return errors.Join(errs...)
}

// withServers runs start in a subtest named "run" and, once that subtest
// and its cleanups are over, checks that every process it returned is
// gone. It logs how long start took.
func withServers(t *testing.T, start func(t *testing.T) []*Process, use func(t *testing.T)) {
	t.Helper()
	var procs []*Process
	t.Run("run", func(t *testing.T) {
		begin := time.Now()
		procs = start(t)
		t.Logf("started %d process(es) in %v", len(procs), time.Since(begin).Round(time.Millisecond))
		track(procs...)
		use(t)
	})
	for _, p := range procs {
		if err := processGone(p); err != nil {
			t.Errorf("after teardown: %v", err)
		}
	}
}
