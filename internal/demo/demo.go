//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || illumos

// Package demo is golocker's demo, which `make demo` runs on an embedded
// SQLite file (examples/demo) and `lockctl demo` on any backend shared
// between processes: worker processes take one lock in turn and append to
// a ledger that refuses any write whose fencing token is below one it has
// accepted. One worker is frozen (SIGSTOP) while it holds the lock, for
// longer than its lease, as a long GC pause or a stalled VM would freeze
// it; the lock moves on to another worker, and when the frozen one wakes
// up believing it still holds the lock, the ledger refuses its write. The
// demo prints the timeline and a verdict.
//
// The program that runs the demo is also its workers: it starts itself
// with arguments of its choosing (Config.Worker), and then calls Worker.
package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Timing: the frozen worker is frozen for pauseFactor leases, long enough
// for its lease to run out and for others to write after it. Workers go
// round until Run closes their stdin (once the frozen worker has written
// after waking up), at most maxRounds times: with a fixed number of rounds
// the others could finish before a worker that started late was even
// frozen, and nobody would take the lock from it.
const (
	workers     = 3
	maxRounds   = 300
	ttl         = time.Second
	hold        = 100 * time.Millisecond
	pauseFactor = 2.5
	victim      = 1
	timeout     = 2 * time.Minute
)

// Config is what Run needs from the program that runs the demo.
type Config struct {
	// URL is the backend, shared between processes; the workers find it
	// in $LOCKER_URL, not on their command line, which every user of the
	// machine can read.
	URL string
	// Shown is the backend as the demo prints it, without its password.
	Shown string
	// Worker returns the command of a worker process: the program itself,
	// with arguments that make it call Worker with args.
	Worker func(ctx context.Context, args ...string) *exec.Cmd
	// Stdout gets the timeline and the verdict, Stderr the workers'
	// stderr.
	Stdout, Stderr io.Writer
}

// ErrFailed is returned by Run when the verdict is FAIL.
var ErrFailed = errors.New("demo: FAIL")

// event is one line a worker prints on its stdout.
type event struct {
	MS    int64  `json:"ms"` // Unix milliseconds
	W     int    `json:"w"`
	Ev    string `json:"ev"`
	Token uint64 `json:"token,omitempty"`
	Msg   string `json:"msg,omitempty"`
}

// Run runs the demo: it starts the workers, freezes one while it holds
// the lock, and prints what happens and a verdict. It returns nil when the
// verdict is OK, an error wrapping ErrFailed when it is not, and another
// error when the demo could not run.
func Run(ctx context.Context, cfg Config) error {
	dir, err := os.MkdirTemp("", "golocker-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	led := &ledger{path: filepath.Join(dir, "ledger.json")}
	if err := led.init(); err != nil {
		return err
	}
	name := fmt.Sprintf("golocker-demo/%d-%d", os.Getpid(), time.Now().UnixNano())

	out := cfg.Stdout
	fmt.Fprintf(out, "demo: %d worker processes take the lock %q on %s (lease %v) and append to a ledger\n", workers, name, cfg.Shown, ttl)
	fmt.Fprintf(out, "      that refuses any write whose fencing token is below one it has accepted.\n")
	fmt.Fprintf(out, "      worker-%d will be frozen (SIGSTOP) while it holds the lock, for %.1f leases.\n\n", victim, pauseFactor)

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t, err := start(ctx, cfg, led.path, name)
	if err != nil {
		return err
	}
	defer t.stop()
	seen := t.watch(out)
	failed := t.wait(cfg.Stderr)
	st, err := led.read()
	if err != nil {
		return err
	}
	return verdict(out, st, seen, failed)
}

// team is the worker processes and their events.
type team struct {
	procs  []*exec.Cmd
	stdins []io.Closer
	events chan event
}

// start starts the workers; the caller stops them.
func start(ctx context.Context, cfg Config, ledgerPath, name string) (*team, error) {
	t := &team{events: make(chan event, 64)}
	var readers sync.WaitGroup
	for w := range workers {
		cmd := cfg.Worker(ctx, "-ledger", ledgerPath, "-id", strconv.Itoa(w), "-name", name)
		cmd.Env = append(os.Environ(), "LOCKER_URL="+cfg.URL)
		cmd.Stderr = cfg.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.stop()
			return nil, err
		}
		in, err := cmd.StdinPipe()
		if err != nil {
			t.stop()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			t.stop()
			return nil, fmt.Errorf("starting a worker: %w", err)
		}
		t.procs, t.stdins = append(t.procs, cmd), append(t.stdins, in)
		readers.Add(1)
		go func() {
			defer readers.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var ev event
				if json.Unmarshal(sc.Bytes(), &ev) == nil {
					t.events <- ev
				}
			}
		}()
	}
	go func() {
		readers.Wait()
		close(t.events)
	}()
	return t, nil
}

// stop tells the workers to end their current round and exit.
func (t *team) stop() {
	for _, in := range t.stdins {
		_ = in.Close()
	}
}

// seen is what the timeline showed of the frozen worker.
type seen struct {
	refused bool // its stale write was refused
	told    bool // its Unlock said the hold was lost
}

// watch prints the workers' events as they come, freezes the victim once
// it holds the lock and thaws it pauseFactor leases later, and stops the
// workers once the thawed victim has written. It returns when every
// worker has closed its stdout.
func (t *team) watch(out io.Writer) seen {
	start := time.Now()
	say := func(at time.Time, who, format string, args ...any) {
		fmt.Fprintf(out, "%+8dms  %-9s %s\n", at.Sub(start).Milliseconds(), who, fmt.Sprintf(format, args...))
	}
	var s seen
	frozen, thawed := false, false
	var thaw <-chan time.Time
	events := t.events
	for events != nil || thaw != nil {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			who := fmt.Sprintf("worker-%d", ev.W)
			at := time.UnixMilli(ev.MS)
			switch ev.Ev {
			case "holding":
				say(at, who, "holds the lock, token %d", ev.Token)
				if ev.W == victim && !frozen {
					frozen = true
					_ = t.procs[victim].Process.Signal(syscall.SIGSTOP)
					say(time.Now(), "demo", "SIGSTOP %s: frozen while holding token %d; nothing renews its lease now", who, ev.Token)
					thaw = time.After(time.Duration(pauseFactor * float64(ttl)))
				}
			case "accepted":
				say(at, who, "writes with token %d: accepted", ev.Token)
			case "refused":
				say(at, who, "writes with token %d: REFUSED (%s)", ev.Token, ev.Msg)
				s.refused = s.refused || ev.W == victim
			case "lost":
				say(at, who, "is told its hold was lost: %s", ev.Msg)
				s.told = s.told || ev.W == victim
			case "error":
				say(at, who, "error: %s", ev.Msg)
			}
			if ev.W == victim && thawed && (ev.Ev == "accepted" || ev.Ev == "refused") {
				t.stop()
			}
		case <-thaw:
			thaw, thawed = nil, true
			_ = t.procs[victim].Process.Signal(syscall.SIGCONT)
			say(time.Now(), "demo", "SIGCONT worker-%d: it wakes up believing it still holds the lock", victim)
		}
	}
	return s
}

// wait waits for the workers and returns how many failed.
func (t *team) wait(stderr io.Writer) int {
	failed := 0
	for w, p := range t.procs {
		if err := p.Wait(); err != nil {
			failed++
			fmt.Fprintf(stderr, "demo: worker-%d: %v\n", w, err)
		}
	}
	return failed
}

// verdict prints the outcome and returns nil for OK.
func verdict(out io.Writer, st *ledgerState, s seen, failed int) error {
	fmt.Fprintf(out, "\n%d writes accepted in increasing token order, %d stale write(s) refused.\n", len(st.Writes), st.Refused)
	var why string
	switch {
	case failed > 0:
		why = "a worker failed"
	case !s.refused:
		why = "the frozen worker's stale write was not refused"
	default:
		fmt.Fprintf(out, "verdict: OK — the lock moved on when worker-%d's lease ran out, and its stale write was refused by its fencing token", victim)
		if s.told {
			fmt.Fprint(out, "; it was told its hold was lost")
		}
		fmt.Fprintln(out, ".")
		return nil
	}
	fmt.Fprintln(out, "verdict: FAIL — "+why)
	return fmt.Errorf("%w: %s", ErrFailed, why)
}
