package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// loadGrace is how long load waits for its workers after the run's end
// before it kills them.
const loadGrace = 30 * time.Second

// loadWarmUp is the time the workers have to start and connect before the
// run begins, all at once: a worker that is late joins late.
const loadWarmUp = time.Second

func cmdLoad(ctx context.Context, g globals, args []string, e env) error {
	fs := newFlags("load", &g)
	var dur durationValue
	fs.Var(&dur, "duration", "how long to run (default: the scenario's)")
	workers := fs.Int("workers", 0, "worker processes (default: the scenario's)")
	handles := fs.Int("handles", 0, "goroutines per worker (default: the scenario's)")
	rate := fs.Float64("rate", 0, "requests per second of an http scenario (default: the scenario's)")
	out := fs.String("out", "", "directory for report.html, series.json and series.csv (default: load-SCENARIO-TIME)")
	pos, _, dash, err := parseArgs(fs, args)
	switch {
	case err != nil:
		return err
	case len(pos) != 1 || dash:
		return usage("load: want one SCENARIO, a file or one of: %s", strings.Join(scenarioNames(), ", "))
	}
	s, err := loadScenario(pos[0])
	if err != nil {
		return usage("load: %v", err)
	}
	if dur.set {
		s.Duration = duration(dur.d)
	}
	if *workers != 0 {
		s.Workers = *workers
	}
	if *handles != 0 {
		s.Handles = *handles
	}
	if *rate != 0 {
		s.Rate = *rate
	}
	if err := s.validate(); err != nil {
		return usage("load: %v", err)
	}
	u, _, err := backendURL(g, e)
	if err != nil {
		return fail(exitBackend, "%v", err)
	}
	g.url = sessionURL(u, s.TTL.std())
	shown, err := sharedBackend(ctx, g, e, "load", "")
	if err != nil {
		return err
	}
	if *out == "" {
		*out = "load-" + s.Name + "-" + time.Now().UTC().Format("20060102T150405Z")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fail(exitFailure, "load: %v", err)
	}
	self, tmp, err := workerFiles("load")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fail(exitFailure, "load: %v", err)
	}
	file := filepath.Join(tmp, "scenario.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		return fail(exitFailure, "load: %v", err)
	}
	co := &coordinator{
		s: s, e: e, self: self, url: g.url, file: file, shown: shown,
		fence: filepath.Join(tmp, "fence.json"),
		run:   fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()),
		recs:  make(chan loadRec, 4096),
		procs: map[int]*loadProc{},
	}
	fmt.Fprintf(e.stdout, "load %s on %s: %d workers × %d handles for %v\n", s.Name, shown, s.Workers, s.Handles, s.Duration.std())
	if err := co.runAll(ctx); err != nil {
		return fail(exitFailure, "load: %v", err)
	}
	rep := co.report()
	if err := rep.write(*out); err != nil {
		return fail(exitFailure, "load: %v", err)
	}
	rep.printSummary(e.stdout)
	fmt.Fprintf(e.stdout, "report: %s\n", filepath.Join(*out, "report.html"))
	if n := len(rep.Summary.WorkerFailures); n > 0 {
		return fail(exitFailure, "load: %d worker(s) failed", n)
	}
	if rep.Summary.Acquisitions == 0 {
		return fail(exitFailure, "load: no acquisition in %v", s.Duration.std())
	}
	return nil
}

// loadProc is a worker process.
type loadProc struct {
	cmd     *exec.Cmd
	stdin   io.Closer
	stopped bool
	killed  bool
}

// faultRec is a fault the coordinator applied.
type faultRec struct {
	Kind  string `json:"kind"`
	At    int64  `json:"at"` // Unix nanoseconds
	W     int    `json:"w"`
	Token uint64 `json:"token"`
}

// coordinator starts the workers, applies the faults, gathers the records.
type coordinator struct {
	s                *scenario
	e                env
	self, url, file  string
	shown, fence     string
	run              string
	start, end       time.Time
	recs             chan loadRec
	procs            map[int]*loadProc
	nextID, alive    int
	holds, counters  []loadRec
	faults           []faultRec
	errs             []string
	nerrs            int
	workerExitErrors []string
}

func (co *coordinator) spawn(ctx context.Context) error {
	id := co.nextID
	co.nextID++
	cmd := exec.CommandContext(ctx, co.self, loadWorkerCmd, "--scenario", co.file, "--id", strconv.Itoa(id),
		"--run", co.run, "--from", strconv.FormatInt(co.start.UnixNano(), 10),
		"--until", strconv.FormatInt(co.end.UnixNano(), 10), "--fence", co.fence)
	// The URL goes through the environment: a command line is visible to
	// every user of the machine, and it may hold a password.
	cmd.Env = append(os.Environ(), "LOCKER_URL="+co.url)
	cmd.Stderr = co.e.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting a worker: %v", err)
	}
	co.procs[id] = &loadProc{cmd: cmd, stdin: in}
	co.alive++
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var r loadRec
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				co.recs <- r
			}
		}
		co.recs <- loadRec{K: "eof", W: id}
	}()
	return nil
}

// run runs the workers to the end and gathers what they report.
func (co *coordinator) runAll(ctx context.Context) error {
	co.start = time.Now().Add(loadWarmUp)
	co.end = co.start.Add(co.s.Duration.std())
	ctx, cancel := context.WithDeadline(ctx, co.end.Add(loadGrace))
	defer cancel()
	defer func() {
		// Whatever happened, no worker is left stopped or running.
		for _, p := range co.procs {
			if p.stopped {
				_ = p.cmd.Process.Signal(syscall.SIGCONT)
			}
			_ = p.stdin.Close()
		}
	}()
	for range co.s.Workers {
		if err := co.spawn(ctx); err != nil {
			return err
		}
	}
	prog := newProgress(co.e.stderr, co.s.Duration.std())
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	f := co.s.Fault
	var armedAt time.Time // the next fault hits the next holder after this
	if f != nil {
		armedAt = co.start.Add(f.Every.std())
	}
	var contAt time.Time
	stoppedW, kinds := -1, 0
	acq, lost := 0, int64(0)
	for co.alive > 0 {
		select {
		case <-ctx.Done():
			for _, p := range co.procs {
				_ = p.cmd.Process.Kill()
			}
			return fmt.Errorf("the workers did not end within %v of the run's end", loadGrace)
		case r := <-co.recs:
			switch r.K {
			case "eof":
				co.alive--
			case "h":
				co.holds = append(co.holds, r)
				if r.S == 0 {
					acq++
				}
			case "c":
				co.counters = append(co.counters, r)
				lost += r.Lost
			case "e":
				co.nerrs++
				if len(co.errs) < 10 {
					co.errs = append(co.errs, fmt.Sprintf("worker-%d: %s", r.W, r.M))
				}
			case "s":
				now := time.Now()
				if f == nil || armedAt.IsZero() || now.Before(armedAt) || now.After(co.end.Add(-f.Every.std()/2)) {
					continue
				}
				p := co.procs[r.W]
				if p == nil || p.killed || p.stopped {
					continue
				}
				kind := f.Kinds[kinds%len(f.Kinds)]
				kinds++
				co.faults = append(co.faults, faultRec{Kind: kind, At: now.UnixNano(), W: r.W, Token: r.T})
				armedAt = time.Time{}
				switch kind {
				case "kill":
					p.killed = true
					_ = p.cmd.Process.Kill()
					lost++
					// Its hold ends here as far as its work goes; the
					// store frees it when its lease runs out.
					co.holds = append(co.holds, loadRec{K: "h", W: r.W, N: r.N, A: r.A, R: now.UnixNano(), T: r.T, L: true})
					armedAt = now.Add(f.Every.std())
					if err := co.spawn(ctx); err != nil {
						return err
					}
				case "stop":
					p.stopped = true
					stoppedW = r.W
					_ = p.cmd.Process.Signal(syscall.SIGSTOP)
					contAt = now.Add(f.Stop.std())
				}
			}
		case now := <-tick.C:
			if stoppedW >= 0 && (now.After(contAt) || now.After(co.end)) {
				p := co.procs[stoppedW]
				_ = p.cmd.Process.Signal(syscall.SIGCONT)
				p.stopped, stoppedW = false, -1
				armedAt = now.Add(f.Every.std())
			}
			prog.update(max(0, now.Sub(co.start)), acq, lost, len(co.faults))
		}
	}
	prog.done(time.Since(co.start), acq, lost, len(co.faults))
	for id, p := range co.procs {
		if err := p.cmd.Wait(); err != nil && !p.killed {
			co.workerExitErrors = append(co.workerExitErrors, fmt.Sprintf("worker-%d: %v", id, err))
		}
	}
	return nil
}

// progress draws a progress bar on a terminal, or a line every quarter
// of the run elsewhere.
type progress struct {
	w       io.Writer
	tty     bool
	total   time.Duration
	quarter int
}

func newProgress(w io.Writer, total time.Duration) *progress {
	p := &progress{w: w, total: total}
	p.tty = isTerminal(w)
	return p
}

func (p *progress) line(el time.Duration, acq int, lost int64, faults int) string {
	frac := min(1, float64(el)/float64(p.total))
	const width = 30
	n := int(frac * width)
	rate := 0.0
	if el > 0 {
		rate = float64(acq) / el.Seconds()
	}
	s := fmt.Sprintf("[%s%s] %3.0f%% %6.1fs/%v  %d acquisitions (%.0f/s)  lost %d",
		strings.Repeat("#", n), strings.Repeat(".", width-n), frac*100, min(el, p.total).Seconds(), p.total, acq, rate, lost)
	if faults > 0 {
		s += fmt.Sprintf("  faults %d", faults)
	}
	return s
}

func (p *progress) update(el time.Duration, acq int, lost int64, faults int) {
	if p.tty {
		fmt.Fprint(p.w, "\r"+p.line(el, acq, lost, faults)+"\x1b[K")
		return
	}
	if q := int(4 * float64(el) / float64(p.total)); q > p.quarter && q <= 4 {
		p.quarter = q
		fmt.Fprintln(p.w, p.line(el, acq, lost, faults))
	}
}

func (p *progress) done(el time.Duration, acq int, lost int64, faults int) {
	if p.tty {
		fmt.Fprintln(p.w, "\r"+p.line(el, acq, lost, faults)+"\x1b[K")
	}
}
