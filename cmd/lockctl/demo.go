package main

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

	"github.com/golocker/locker"
)

// demoWorkerCmd is the hidden subcommand that demo starts in each worker
// process.
const demoWorkerCmd = "demo-worker"

// Demo timing: the paused worker is frozen for pauseFactor leases, long
// enough for its lease to run out and for others to write after it.
// Workers go round until demo closes their stdin (once the frozen worker
// has written after waking up), at most demoMaxRounds times: a fixed
// number of rounds let the others finish before a worker that started
// late was even frozen, and nobody was left to take the lock from it.
const (
	demoWorkers   = 3
	demoMaxRounds = 300
	demoTTL       = time.Second
	demoHold      = 100 * time.Millisecond
	pauseFactor   = 2.5
	victim        = 1
)

// event is one line a worker prints on its stdout.
type event struct {
	MS    int64  `json:"ms"` // Unix milliseconds
	W     int    `json:"w"`
	Ev    string `json:"ev"`
	Token uint64 `json:"token,omitempty"`
	Msg   string `json:"msg,omitempty"`
}

func cmdDemo(ctx context.Context, g globals, args []string, e env) error {
	fs := newFlags("demo", &g)
	if err := parseNoArgs(fs, args, ""); err != nil {
		return err
	}
	u, _, err := backendURL(g, e)
	if err != nil {
		return fail(exitBackend, "%v", err)
	}
	shown, err := sharedBackend(ctx, g, e, "demo", " (leave --url unset for the embedded SQLite default)")
	if err != nil {
		return err
	}
	self, dir, err := workerFiles("demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	led := &ledger{path: filepath.Join(dir, "ledger.json")}
	if err := led.init(); err != nil {
		return fail(exitFailure, "demo: %v", err)
	}
	name := fmt.Sprintf("lockctl-demo/%d-%d", os.Getpid(), time.Now().UnixNano())

	fmt.Fprintf(e.stdout, "demo: %d worker processes take the lock %q on %s (lease %v) and append to a ledger\n", demoWorkers, name, shown, demoTTL)
	fmt.Fprintf(e.stdout, "      that refuses any write whose fencing token is below one it has accepted.\n")
	fmt.Fprintf(e.stdout, "      worker-%d will be frozen (SIGSTOP) while it holds the lock, for %.1f leases.\n\n", victim, pauseFactor)

	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	events := make(chan event, 64)
	procs := make([]*exec.Cmd, demoWorkers)
	stdins := make([]io.Closer, demoWorkers)
	stopWorkers := func() {
		for _, in := range stdins {
			_ = in.Close()
		}
	}
	defer stopWorkers()
	var readers sync.WaitGroup
	for w := range demoWorkers {
		cmd := exec.CommandContext(ctx, self, demoWorkerCmd, "--ledger", led.path, "--id", strconv.Itoa(w), "--name", name)
		// The URL goes through the environment: a command line is visible
		// to every user of the machine, and it may hold a password.
		cmd.Env = append(os.Environ(), "LOCKER_URL="+u)
		cmd.Stderr = e.stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return fail(exitFailure, "demo: %v", err)
		}
		if stdins[w], err = cmd.StdinPipe(); err != nil {
			return fail(exitFailure, "demo: %v", err)
		}
		if err := cmd.Start(); err != nil {
			return fail(exitFailure, "demo: starting a worker: %v", err)
		}
		procs[w] = cmd
		readers.Add(1)
		go func() {
			defer readers.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var ev event
				if json.Unmarshal(sc.Bytes(), &ev) == nil {
					events <- ev
				}
			}
		}()
	}
	go func() {
		readers.Wait()
		close(events)
	}()

	start := time.Now()
	say := func(at time.Time, who, format string, args ...any) {
		fmt.Fprintf(e.stdout, "%+8dms  %-9s %s\n", at.Sub(start).Milliseconds(), who, fmt.Sprintf(format, args...))
	}
	paused, resumed := false, false
	var resume <-chan time.Time
	refusedVictim, victimTold := false, false
	for events != nil || resume != nil {
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
				if ev.W == victim && !paused {
					paused = true
					_ = procs[victim].Process.Signal(syscall.SIGSTOP)
					say(time.Now(), "demo", "SIGSTOP %s: frozen while holding token %d; nothing renews its lease now", who, ev.Token)
					resume = time.After(time.Duration(pauseFactor * float64(demoTTL)))
				}
			case "accepted":
				say(at, who, "writes with token %d: accepted", ev.Token)
			case "refused":
				say(at, who, "writes with token %d: REFUSED (%s)", ev.Token, ev.Msg)
				refusedVictim = refusedVictim || ev.W == victim
			case "lost":
				say(at, who, "is told its hold was lost: %s", ev.Msg)
				victimTold = victimTold || ev.W == victim
			case "error":
				say(at, who, "error: %s", ev.Msg)
			}
			if ev.W == victim && resumed && (ev.Ev == "accepted" || ev.Ev == "refused") {
				// The frozen worker has made its write: the workers end
				// their current round and exit.
				stopWorkers()
			}
		case <-resume:
			resume, resumed = nil, true
			_ = procs[victim].Process.Signal(syscall.SIGCONT)
			say(time.Now(), "demo", "SIGCONT worker-%d: it wakes up believing it still holds the lock", victim)
		}
	}
	failed := 0
	for w, p := range procs {
		if err := p.Wait(); err != nil {
			failed++
			fmt.Fprintf(e.stderr, "lockctl: worker-%d: %v\n", w, err)
		}
	}
	st, err := led.read()
	if err != nil {
		return fail(exitFailure, "demo: %v", err)
	}
	fmt.Fprintf(e.stdout, "\n%d writes accepted in increasing token order, %d stale write(s) refused.\n", len(st.Writes), st.Refused)
	switch {
	case failed > 0:
		fmt.Fprintln(e.stdout, "verdict: FAIL — a worker failed")
	case !refusedVictim:
		fmt.Fprintln(e.stdout, "verdict: FAIL — the frozen worker's stale write was not refused")
	default:
		fmt.Fprintf(e.stdout, "verdict: OK — the lock moved on when worker-%d's lease ran out, and its stale write was refused by its fencing token", victim)
		if victimTold {
			fmt.Fprint(e.stdout, "; it was told its hold was lost")
		}
		fmt.Fprintln(e.stdout, ".")
		return nil
	}
	return &exitError{code: exitFailure}
}

// cmdDemoWorker is one demo worker: rounds of lock, work, fenced write,
// unlock, until its stdin ends. It reports each step as a JSON line on
// stdout.
func cmdDemoWorker(ctx context.Context, g globals, args []string, e env) error {
	fs := newFlags(demoWorkerCmd, &g)
	path := fs.String("ledger", "", "ledger file")
	id := fs.Int("id", 0, "worker number")
	name := fs.String("name", "", "lock name")
	if _, _, _, err := parseArgs(fs, args); err != nil {
		return err
	}
	enc := json.NewEncoder(e.stdout)
	emit := func(ev string, token uint64, msg string) {
		_ = enc.Encode(event{MS: time.Now().UnixMilli(), W: *id, Ev: ev, Token: token, Msg: msg})
	}
	c, _, err := open(ctx, g, e, locker.WithTTL(demoTTL))
	if err != nil {
		emit("error", 0, err.Error())
		return err
	}
	defer c.Close()
	led := &ledger{path: *path}
	stop := make(chan struct{})
	if e.stdin != nil {
		go func() {
			_, _ = io.Copy(io.Discard, e.stdin)
			close(stop)
		}()
	}
	for range demoMaxRounds {
		select {
		case <-stop:
			return nil
		default:
		}
		m := c.NewMutex(*name)
		if err := m.Lock(ctx); err != nil {
			emit("error", 0, err.Error())
			return err
		}
		tok := m.Token()
		emit("holding", tok, "")
		time.Sleep(demoHold) // the work; a frozen worker resumes here
		switch ok, highest, err := led.write(*id, tok); {
		case err != nil:
			emit("error", tok, err.Error())
		case ok:
			emit("accepted", tok, "")
		default:
			emit("refused", tok, fmt.Sprintf("the ledger has seen token %d", highest))
		}
		if err := m.Unlock(ctx); errors.Is(err, locker.ErrLost) {
			emit("lost", tok, "its lease ran out while it was frozen")
		} else if err != nil {
			emit("error", tok, err.Error())
		}
		time.Sleep(demoHold / 2)
	}
	return nil
}

// ledger is the resource the demo's lock guards: a file that accepts a
// write only with a token at least as high as any it has accepted. The
// check-and-write is atomic across processes (flock), as a storage server's
// compare-and-set would be.
type ledger struct{ path string }

type ledgerState struct {
	Highest uint64       `json:"highest"`
	Writes  []ledgerItem `json:"writes"`
	Refused int          `json:"refused"`
}

type ledgerItem struct {
	W     int    `json:"w"`
	Token uint64 `json:"token"`
}

func (l *ledger) init() error {
	return l.update(func(*ledgerState) {})
}

func (l *ledger) read() (*ledgerState, error) {
	var st ledgerState
	b, err := os.ReadFile(l.path)
	if err != nil {
		return nil, err
	}
	return &st, json.Unmarshal(b, &st)
}

func (l *ledger) write(w int, token uint64) (accepted bool, highest uint64, err error) {
	err = l.update(func(st *ledgerState) {
		if token < st.Highest {
			st.Refused++
			highest = st.Highest
			return
		}
		st.Highest, accepted, highest = token, true, token
		st.Writes = append(st.Writes, ledgerItem{W: w, Token: token})
	})
	return accepted, highest, err
}

// update applies f to the ledger under an exclusive flock.
func (l *ledger) update(f func(*ledgerState)) error {
	lf, err := os.OpenFile(l.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	var st ledgerState
	if b, err := os.ReadFile(l.path); err == nil {
		if err := json.Unmarshal(b, &st); err != nil {
			return err
		}
	}
	f(&st)
	b, err := json.Marshal(&st)
	if err != nil {
		return err
	}
	tmp := l.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, l.path)
}
