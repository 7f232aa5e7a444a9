package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/testserver"
)

// runConfig is one run's settings.
type runConfig struct {
	duration time.Duration
	workers  int
	names    []string
	ttl      time.Duration
	seed     uint64
	self     string   // this program, for the workers
	kinds    []string // the fault kinds allowed; nil: all
	verbose  bool
}

// worker is one worker process and its fault controls.
type worker struct {
	id      int
	cmd     *exec.Cmd
	stdin   io.Closer
	fn      *conformance.FaultNet
	proxies []*proxy
	exited  chan struct{}
	err     error // set before exited closes
}

// coordinator runs the workers of one run and collects their events.
type coordinator struct {
	cfg    runConfig
	topo   *topology
	fence  *fence
	rng    *rand.Rand
	t0     time.Time
	events chan event

	mu      sync.Mutex
	log     []event
	holding map[int]string // worker → name it holds now
	calls   map[int]int64  // worker → when its current acquisition was invoked
	grants  []grant        // every acquisition, as it returned
	ready   map[int]bool
	workers map[int]*worker
	nextID  int
	faults  []faultRecord
	readers sync.WaitGroup
}

// grant is one acquisition as the coordinator saw it return.
type grant struct {
	w         int
	name      string
	call, ret int64
}

// settleTimeout bounds the wait for the workers to acquire again after a
// server fault or a holder's death, before the next fault.
const settleTimeout = 15 * time.Second

// settle waits until an acquisition that satisfies ok has returned, at most
// settleTimeout: the next fault waits for the workers to recover from this
// one, so that the time to recover is measured alone.
func (c *coordinator) settle(ctx context.Context, ok func(g grant) bool) {
	deadline := time.Now().Add(settleTimeout)
	for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		c.mu.Lock()
		found := false
		for j := len(c.grants) - 1; j >= 0 && !found; j-- {
			found = ok(c.grants[j])
		}
		c.mu.Unlock()
		if found {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// runResult is one run of one backend.
type runResult struct {
	Backend      string         `json:"backend"`
	Run          int            `json:"run"`
	Seed         uint64         `json:"seed"`
	Duration     string         `json:"duration"`
	Workers      int            `json:"workers"`
	Names        int            `json:"names"`
	TTL          string         `json:"ttl"`
	Acquisitions int            `json:"acquisitions"`
	AcqFailures  int            `json:"acquire_failures"`
	Faults       map[string]int `json:"faults"`
	FaultLog     []faultRecord  `json:"fault_log"`
	Fence        fenceStats     `json:"fence"`
	Violations   []violation    `json:"violations"`
	Unexplained  int            `json:"unexplained"`
	Linearizable string         `json:"linearizable"`
	FreeAfter    []string       `json:"free_after_death"`
	FreeDetail   []string       `json:"free_after_death_detail,omitempty"`
	Unavailable  []string       `json:"unavailable_after_server_fault"`
	ServerFault  string         `json:"server_fault,omitempty"`
	Error        string         `json:"error,omitempty"`
	Skipped      string         `json:"skipped,omitempty"`
	free, unav   []time.Duration
	history      []event
}

// runBackend starts spec's servers, runs the workers under faults for
// cfg.duration and checks the history.
func runBackend(ctx context.Context, spec backendSpec, run int, cfg runConfig) *runResult {
	res := &runResult{Backend: spec.name, Run: run, Seed: cfg.seed, Duration: cfg.duration.String(),
		Workers: cfg.workers, Names: len(cfg.names), TTL: cfg.ttl.String(), Faults: map[string]int{}}
	var servers testserver.Shared
	defer servers.Close()
	var topo *topology
	out := servers.Run(func(t testserver.TB) { topo = spec.start(t, cfg.ttl) })
	switch {
	case out.Skipped:
		res.Skipped = out.Message
		return res
	case out.Failed:
		res.Error = "starting the servers: " + out.Message
		return res
	}
	res.ServerFault = topo.serverFault
	f, err := startFence()
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer f.close()
	c := &coordinator{cfg: cfg, topo: topo, fence: f, rng: rand.New(rand.NewPCG(cfg.seed, nameHash(spec.name))),
		events: make(chan event, 1024), holding: map[int]string{}, calls: map[int]int64{}, ready: map[int]bool{}, workers: map[int]*worker{}}
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for e := range c.events {
			c.record(e)
		}
	}()
	err = c.run(ctx)
	c.stopAll()
	c.readers.Wait()
	close(c.events)
	<-collected
	if err != nil {
		res.Error = err.Error()
	}
	res.history = c.log
	fs := f.stats()
	r := check(c.log, c.faults, cfg.ttl, fs, 60*time.Second)
	res.Fence = fs
	res.FaultLog = c.faults
	for _, fr := range c.faults {
		if fr.Note != "end of run" {
			res.Faults[fr.Kind]++
		}
	}
	res.fill(r)
	return res
}

func (c *coordinator) record(e event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, e)
	switch e.Ev {
	case evReady:
		c.ready[e.W] = true
	case evAcqCall:
		c.calls[e.W] = e.T
	case evAcqOK:
		c.holding[e.W] = e.Name
		c.grants = append(c.grants, grant{w: e.W, name: e.Name, call: c.calls[e.W], ret: e.T})
	case evRelCall:
		delete(c.holding, e.W)
	case evError:
		if c.cfg.verbose {
			fmt.Fprintf(os.Stderr, "chaos: w%d: %s\n", e.W, e.Msg)
		}
	}
}

// run starts the workers and injects faults until the run's time is up.
func (c *coordinator) run(ctx context.Context) error {
	for range c.cfg.workers {
		if _, err := c.startWorker(); err != nil {
			return err
		}
	}
	if err := c.waitReady(60 * time.Second); err != nil {
		return err
	}
	c.t0 = time.Now()
	end := c.t0.Add(c.cfg.duration)
	lastServer := time.Time{}
	for i := 0; i < 10_000 && time.Now().Before(end) && ctx.Err() == nil; i++ {
		// A quiet moment between faults lets the workers acquire again.
		if !c.sleepUntil(time.Now().Add(time.Duration(500+c.rng.IntN(1000))*time.Millisecond), end) {
			break
		}
		kinds := []string{fPause, fKill}
		if c.topo.upstreams != nil {
			kinds = append(kinds, fStall, fLatency, fCut)
		}
		// A server fault at most every 8 s: each takes seconds to recover.
		if c.topo.serverFault != "" && time.Since(lastServer) > 8*time.Second {
			kinds = append(kinds, c.topo.serverFault, c.topo.serverFault)
		}
		if c.cfg.kinds != nil {
			kinds = slices.DeleteFunc(kinds, func(k string) bool { return !slices.Contains(c.cfg.kinds, k) })
			if len(kinds) == 0 {
				continue
			}
		}
		kind := kinds[c.rng.IntN(len(kinds))]
		// The first fault is the server fault, if the backend has one, so
		// that a short run (CI's) has one too.
		if i == 0 && slices.Contains(kinds, c.topo.serverFault) {
			kind = c.topo.serverFault
		}
		if serverFault(kind) {
			lastServer = time.Now()
		}
		if err := c.inject(ctx, kind); err != nil {
			return fmt.Errorf("fault %s: %w", kind, err)
		}
	}
	return nil
}

// sleepUntil waits until t or end, whichever is first, and reports whether
// t came first.
func (c *coordinator) sleepUntil(t, end time.Time) bool {
	if t.After(end) {
		time.Sleep(time.Until(end))
		return false
	}
	time.Sleep(time.Until(t))
	return true
}

func (c *coordinator) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		n := 0
		for id := range c.workers {
			if c.ready[id] {
				n++
			}
		}
		var exited []string
		for id, w := range c.workers {
			select {
			case <-w.exited:
				exited = append(exited, fmt.Sprintf("w%d: %v", id, w.err))
			default:
			}
		}
		total := len(c.workers)
		c.mu.Unlock()
		if len(exited) > 0 {
			return fmt.Errorf("workers exited before they were ready: %s (run with -v for their errors)", strings.Join(exited, "; "))
		}
		if n == total {
			return nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("workers not ready after %v", timeout)
}

// startWorker starts a worker process with its proxies.
func (c *coordinator) startWorker() (*worker, error) {
	c.mu.Lock()
	id := c.nextID
	c.nextID++
	c.mu.Unlock()
	w := &worker{id: id, fn: conformance.NewFaultNet(), exited: make(chan struct{})}
	addrs := make([]string, 0, len(c.topo.upstreams))
	for _, up := range c.topo.upstreams {
		p, err := startProxy(up, w.fn)
		if err != nil {
			w.closeProxies()
			return nil, err
		}
		w.proxies = append(w.proxies, p)
		addrs = append(addrs, p.addr())
	}
	cmd := exec.Command(c.cfg.self, workerCmd, "-id", strconv.Itoa(id), "-names", strings.Join(c.cfg.names, ","),
		"-fence", c.fence.url(), "-ttl", c.cfg.ttl.String(), "-seed", strconv.FormatUint(c.cfg.seed, 10))
	cmd.Env = append(os.Environ(), "LOCKER_URL="+c.topo.url(addrs))
	if c.cfg.verbose {
		cmd.Stderr = os.Stderr
	}
	// If the coordinator dies, so do its workers.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		w.closeProxies()
		return nil, err
	}
	if w.stdin, err = cmd.StdinPipe(); err != nil {
		w.closeProxies()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		w.closeProxies()
		return nil, err
	}
	w.cmd = cmd
	c.mu.Lock()
	c.workers[id] = w
	c.mu.Unlock()
	c.readers.Add(1)
	go func() {
		defer c.readers.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				c.events <- e
			}
		}
		w.err = cmd.Wait()
		close(w.exited)
	}()
	return w, nil
}

func (w *worker) closeProxies() {
	for _, p := range w.proxies {
		p.close()
	}
}

// victim picks a worker for a fault: one that holds a lock if any does.
func (c *coordinator) victim() (*worker, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var holders, all []int
	for id, w := range c.workers {
		select {
		case <-w.exited:
			continue
		default:
		}
		all = append(all, id)
		if c.holding[id] != "" {
			holders = append(holders, id)
		}
	}
	pick := all
	if len(holders) > 0 {
		pick = holders
	}
	if len(pick) == 0 {
		return nil, ""
	}
	// Map order is random; sort for the seed's sake.
	slices.Sort(pick)
	id := pick[c.rng.IntN(len(pick))]
	return c.workers[id], c.holding[id]
}

func (c *coordinator) addFault(f faultRecord) {
	c.mu.Lock()
	c.faults = append(c.faults, f)
	c.mu.Unlock()
}

// leaseish returns a duration between 1.5 and 2.5 leases: long enough for
// the victim's lease to run out.
func (c *coordinator) leaseish() time.Duration {
	return c.cfg.ttl*3/2 + time.Duration(c.rng.Int64N(int64(c.cfg.ttl)))
}

// inject applies one fault and waits for its end.
func (c *coordinator) inject(ctx context.Context, kind string) error {
	now := func() int64 { return time.Now().UnixNano() }
	if serverFault(kind) {
		name := c.cfg.names[c.rng.IntN(len(c.cfg.names))]
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		defer cancel()
		start := now()
		undo, note, err := c.topo.inject(fctx, name)
		if err != nil {
			return err
		}
		// The server stays down for a while (a failover or an election
		// happens meanwhile), then comes back.
		time.Sleep(time.Duration(500+c.rng.IntN(1500)) * time.Millisecond)
		err = undo(fctx)
		if !c.topo.perName {
			name = ""
		}
		c.addFault(faultRecord{Kind: kind, W: -1, Start: start, End: now(), Name: name, Note: note})
		if err == nil {
			c.settle(ctx, func(g grant) bool { return g.call >= start && (name == "" || g.name == name) })
		}
		return err
	}
	w, name := c.victim()
	if w == nil {
		return nil
	}
	start := now()
	switch kind {
	case fPause:
		if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return nil // it exited meanwhile
		}
		time.Sleep(c.leaseish())
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
	case fKill:
		_ = w.cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-w.exited:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("w%d did not exit after SIGKILL", w.id)
		}
		w.closeProxies()
		c.mu.Lock()
		delete(c.workers, w.id)
		delete(c.holding, w.id)
		c.mu.Unlock()
		c.addFault(faultRecord{Kind: kind, W: w.id, Start: start, End: start, Name: name})
		if _, err := c.startWorker(); err != nil {
			return err
		}
		if err := c.waitReady(30 * time.Second); err != nil {
			return err
		}
		if name != "" {
			c.settle(ctx, func(g grant) bool { return g.name == name && g.w != w.id && g.ret > start })
		}
		return nil
	case fStall:
		w.fn.Pause()
		time.Sleep(c.leaseish())
		w.fn.Resume()
	case fLatency:
		w.fn.SetDelay(time.Duration(20+c.rng.IntN(180)) * time.Millisecond)
		time.Sleep(2 * time.Second)
		w.fn.SetDelay(0)
	case fCut:
		w.fn.Cut()
		time.Sleep(time.Duration(500+c.rng.IntN(1000)) * time.Millisecond)
		w.fn.Restore()
	}
	c.addFault(faultRecord{Kind: kind, W: w.id, Start: start, End: now(), Name: name})
	return nil
}

// stopAll ends every worker: stdin closed, then SIGKILL after 10 s (a kill
// at the end is recorded as a fault, as it leaves holds behind).
func (c *coordinator) stopAll() {
	c.mu.Lock()
	ws := make([]*worker, 0, len(c.workers))
	for _, w := range c.workers {
		ws = append(ws, w)
	}
	c.mu.Unlock()
	for _, w := range ws {
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		w.fn.Resume()
		w.fn.SetDelay(0)
		w.fn.Restore()
		_ = w.stdin.Close()
	}
	deadline := time.After(10 * time.Second)
	for _, w := range ws {
		select {
		case <-w.exited:
		case <-deadline:
		}
		select {
		case <-w.exited:
		default:
			t := time.Now().UnixNano()
			_ = w.cmd.Process.Signal(syscall.SIGKILL)
			<-w.exited
			c.addFault(faultRecord{Kind: fKill, W: w.id, Start: t, End: t, Note: "end of run"})
		}
		w.closeProxies()
	}
}

// nameHash mixes the backend's name into the fault schedule, so that one
// seed gives each backend a schedule of its own.
func nameHash(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// fill sets the figures of a run from its check.
func (res *runResult) fill(r *checkResult) {
	res.Acquisitions = len(r.Holds)
	res.AcqFailures = 0
	for _, e := range res.history {
		if e.Ev == evAcqFail {
			res.AcqFailures++
		}
	}
	res.Violations = r.Violations
	res.Unexplained = r.unexplained()
	res.Linearizable = string(r.Linearizable)
	res.free, res.unav, res.FreeDetail = r.FreeAfterDeath, r.Unavailable, r.FreeDetail
	res.FreeAfter, res.Unavailable = nil, nil
	for _, d := range r.FreeAfterDeath {
		res.FreeAfter = append(res.FreeAfter, d.Round(time.Millisecond).String())
	}
	for _, d := range r.Unavailable {
		res.Unavailable = append(res.Unavailable, d.Round(time.Millisecond).String())
	}
}
