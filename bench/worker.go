package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

// The multi-process scenario runs the test binary again as workers. A
// worker gets its WorkerSpec in the environment variable WorkerEnv, opens
// its handles, locks and unlocks once with each (connections made, scripts
// loaded), and prints {"ready":true} on standard output. It then reads the
// start time from standard input, runs Contend from then on, prints
// {"result":…}, and waits for standard input to close before it closes its
// clients, so that the parent can read the server's counters first.

// WorkerEnv is the environment variable that makes the test binary a
// worker.
const WorkerEnv = "GOLOCKER_BENCH_WORKER"

// WorkerSpec is what one worker runs.
type WorkerSpec struct {
	Config  string `json:"config"` // a Config name
	Addr    string `json:"addr"`
	Name    string `json:"name"` // the lock name
	Handles int    `json:"handles"`
	Params  Params `json:"params"`
}

type workerStart struct {
	StartUnixNano int64 `json:"start_unix_ns"`
}

type workerMsg struct {
	Ready  bool    `json:"ready,omitempty"`
	Result *Result `json:"result,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// Bounds of the worker protocol's steps.
const (
	workerSetupTimeout = 60 * time.Second
	workerWaitTimeout  = 60 * time.Second // for the start line, and for the end after the result
	workerExitTimeout  = 15 * time.Second
	maxWorkerOutput    = 256 << 20
)

// IsWorker reports whether this process was started as a worker.
func IsWorker() bool { return os.Getenv(WorkerEnv) != "" }

// WorkerMain runs this process as a worker and returns its exit code.
func WorkerMain() int {
	out := json.NewEncoder(os.Stdout)
	if err := runWorker(out); err != nil {
		_ = out.Encode(workerMsg{Error: err.Error()})
		fmt.Fprintln(os.Stderr, "bench worker:", err)
		return 1
	}
	return 0
}

func runWorker(out *json.Encoder) error {
	var spec WorkerSpec
	if err := json.Unmarshal([]byte(os.Getenv(WorkerEnv)), &spec); err != nil {
		return fmt.Errorf("%s: %v", WorkerEnv, err)
	}
	cfg, ok := ConfigByName(spec.Config)
	if !ok {
		return fmt.Errorf("unknown config %q", spec.Config)
	}
	lines := make(chan string, 2)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), workerSetupTimeout)
	defer cancel()
	set, err := openWarm(ctx, cfg, spec.Addr, spec.Name, spec.Handles, spec.Params.Duration+workerWaitTimeout)
	if err != nil {
		return err
	}
	defer set.Close()
	if err := out.Encode(workerMsg{Ready: true}); err != nil {
		return err
	}

	var st workerStart
	select {
	case l, ok := <-lines:
		if !ok {
			return errors.New("standard input closed before the start")
		}
		if err := json.Unmarshal([]byte(l), &st); err != nil {
			return fmt.Errorf("start line %q: %v", l, err)
		}
	case <-time.After(workerWaitTimeout):
		return errors.New("no start line")
	}
	var inside atomic.Int32
	r := Contend(context.Background(), set.Handles, spec.Params, time.Unix(0, st.StartUnixNano), &inside)
	if err := out.Encode(workerMsg{Result: &r}); err != nil {
		return err
	}
	t := time.NewTimer(workerWaitTimeout)
	defer t.Stop()
	for {
		select {
		case _, ok := <-lines:
			if ok {
				continue
			}
		case <-t.C:
		}
		return nil
	}
}

// openWarm opens n handles of cfg on the lock name at addr, as cfg.Open
// does, and warms them up with WarmUp within a minute. The caller closes
// the set.
func openWarm(ctx context.Context, cfg Config, addr, name string, n int, maxWait time.Duration) (*Set, error) {
	set, err := cfg.Open(ctx, addr, name, n, maxWait)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := WarmUp(wctx, set.Handles); err != nil {
		set.Close()
		return nil, err
	}
	return set, nil
}

// WarmUp locks and unlocks once with each handle in turn, so that
// connections are open and scripts loaded before anything is measured.
func WarmUp(ctx context.Context, hs []Handle) error {
	for i, h := range hs {
		if err := h.Lock(ctx); err != nil {
			return fmt.Errorf("warm-up lock %d: %w", i, err)
		}
		if err := h.Unlock(ctx); err != nil {
			return fmt.Errorf("warm-up unlock %d: %w", i, err)
		}
	}
	return nil
}

// RunWorkers runs spec in procs worker processes (the executable exe, a
// test binary whose TestMain calls WorkerMain when IsWorker). ready is
// called once every worker is ready, before the start; done once every
// result is in, before the workers close their clients.
func RunWorkers(ctx context.Context, exe string, spec WorkerSpec, procs int, ready, done func() error) ([]Result, error) {
	env, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, workerSetupTimeout+spec.Params.Duration+2*workerWaitTimeout)
	defer cancel()

	ws := make([]*workerProc, procs)
	defer func() {
		for _, w := range ws {
			if w != nil {
				w.stop()
			}
		}
	}()
	for i := range ws {
		w, err := startWorker(ctx, exe, string(env))
		if err != nil {
			return nil, err
		}
		ws[i] = w
	}
	for _, w := range ws {
		if _, err := w.next(ctx, workerSetupTimeout); err != nil {
			return nil, err
		}
	}
	if err := ready(); err != nil {
		return nil, err
	}
	start, _ := json.Marshal(workerStart{StartUnixNano: time.Now().Add(100 * time.Millisecond).UnixNano()})
	for _, w := range ws {
		if _, err := fmt.Fprintf(w.stdin, "%s\n", start); err != nil {
			return nil, fmt.Errorf("worker %d: %v", w.cmd.Process.Pid, err)
		}
	}
	rs := make([]Result, procs)
	for i, w := range ws {
		m, err := w.next(ctx, spec.Params.Duration+workerWaitTimeout)
		if err != nil {
			return nil, err
		}
		if m.Result == nil {
			return nil, fmt.Errorf("worker %d: no result", w.cmd.Process.Pid)
		}
		rs[i] = *m.Result
	}
	if err := done(); err != nil {
		return nil, err
	}
	return rs, nil
}

type workerProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	msgs   chan workerMsg
	stderr *tailBuffer
}

func startWorker(ctx context.Context, exe, spec string) (*workerProc, error) {
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), WorkerEnv+"="+spec)
	cmd.WaitDelay = workerExitTimeout
	w := &workerProc{cmd: cmd, msgs: make(chan workerMsg, 2), stderr: &tailBuffer{max: 4096}}
	cmd.Stderr = w.stderr
	var err error
	if w.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	go func() {
		defer close(w.msgs)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), maxWorkerOutput)
		for sc.Scan() {
			var m workerMsg
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = workerMsg{Error: fmt.Sprintf("bad line %.200q: %v", sc.Text(), err)}
			}
			w.msgs <- m
		}
	}()
	return w, nil
}

// next returns the worker's next message, within d.
func (w *workerProc) next(ctx context.Context, d time.Duration) (workerMsg, error) {
	pid := w.cmd.Process.Pid
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case m, ok := <-w.msgs:
		switch {
		case !ok:
			return m, fmt.Errorf("worker %d ended early; stderr: %s", pid, w.stderr)
		case m.Error != "":
			return m, fmt.Errorf("worker %d: %s; stderr: %s", pid, m.Error, w.stderr)
		}
		return m, nil
	case <-t.C:
		return workerMsg{}, fmt.Errorf("worker %d: no answer within %v; stderr: %s", pid, d, w.stderr)
	case <-ctx.Done():
		return workerMsg{}, ctx.Err()
	}
}

// stop closes the worker's input, which ends it, and waits for it; it
// kills it if it has not ended within workerExitTimeout.
func (w *workerProc) stop() {
	_ = w.stdin.Close()
	done := make(chan struct{})
	go func() {
		_ = w.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(workerExitTimeout):
		_ = w.cmd.Process.Kill()
		<-done
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}
