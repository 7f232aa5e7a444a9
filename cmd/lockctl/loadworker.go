package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/driverkit"
)

// loadWorkerCmd is the hidden subcommand that load starts in each worker
// process.
const loadWorkerCmd = "load-worker"

// loadRec is one line a load worker prints on its stdout. Times are Unix
// nanoseconds: the workers and the coordinator share one machine's clock.
type loadRec struct {
	K string `json:"k"` // h: a hold ended; s: a hold started (faults only); c: counters; e: error
	W int    `json:"w"`
	N int    `json:"n,omitempty"` // name index
	Q int64  `json:"q,omitempty"` // the wait began
	A int64  `json:"a,omitempty"` // Lock returned: held
	R int64  `json:"r,omitempty"` // the critical section ended (before Unlock)
	T uint64 `json:"t,omitempty"` // fencing token
	L bool   `json:"l,omitempty"` // Unlock found the hold lost
	F int    `json:"f,omitempty"` // fenced write: 1 accepted, 2 refused
	S int    `json:"s,omitempty"` // mode http: the status of a request the handler did not serve

	At   int64  `json:"at,omitempty"` // counters: when
	Ren  int64  `json:"ren,omitempty"`
	RErr int64  `json:"rerr,omitempty"`
	Lost int64  `json:"lost,omitempty"`
	Err  int64  `json:"err,omitempty"`
	Drop int64  `json:"drop,omitempty"`
	M    string `json:"m,omitempty"`
}

// Fenced write results.
const (
	fenceAccepted = 1
	fenceRefused  = 2
)

// loadObserver counts renewals and lost holds.
type loadObserver struct {
	ren, rerr, lost atomic.Int64
}

func (o *loadObserver) AcquireStarted(ctx context.Context, _ locker.AcquireStart) context.Context {
	return ctx
}
func (o *loadObserver) AcquireEnded(context.Context, locker.AcquireEnd) {}
func (o *loadObserver) HoldEnded(_ context.Context, e locker.HoldEnd) {
	if e.Lost() && e.Reason != locker.Closed {
		o.lost.Add(1)
	}
}
func (o *loadObserver) Renewed(e locker.Renewal) {
	if e.Err != nil {
		o.rerr.Add(1)
		return
	}
	o.ren.Add(1)
}

// recWriter writes records as JSON lines, buffered and flushed often.
type recWriter struct {
	mu  sync.Mutex
	w   *bufio.Writer
	enc *json.Encoder
}

func newRecWriter(w io.Writer) *recWriter {
	bw := bufio.NewWriterSize(w, 64<<10)
	return &recWriter{w: bw, enc: json.NewEncoder(bw)}
}

func (r *recWriter) put(rec loadRec, flush bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.enc.Encode(rec)
	if flush {
		_ = r.w.Flush()
	}
}

func (r *recWriter) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.w.Flush()
}

// loadWorker is one worker process's state.
type loadWorker struct {
	s      *scenario
	id     int
	run    string
	c      *locker.Client
	obs    *loadObserver
	out    *recWriter
	fence  *fence
	errors atomic.Int64
	drops  atomic.Int64
}

// cmdLoadWorker runs one worker of `lockctl load` until --until or until
// its stdin ends, and reports on stdout.
func cmdLoadWorker(ctx context.Context, g globals, args []string, e env) error {
	fs := newFlags(loadWorkerCmd, &g)
	file := fs.String("scenario", "", "scenario file")
	id := fs.Int("id", 0, "worker number")
	run := fs.String("run", "", "run id (names are lockctl-load/RUN/N)")
	from := fs.Int64("from", 0, "start, Unix nanoseconds")
	until := fs.Int64("until", 0, "end, Unix nanoseconds")
	ledger := fs.String("fence", "", "fenced resource file")
	if _, _, _, err := parseArgs(fs, args); err != nil {
		return err
	}
	s, err := loadScenario(*file)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	ctx, cancel := context.WithDeadline(ctx, time.Unix(0, *until))
	defer cancel()
	if e.stdin != nil {
		go func() {
			_, _ = io.Copy(io.Discard, e.stdin)
			cancel()
		}()
	}
	w := &loadWorker{s: s, id: *id, run: *run, obs: &loadObserver{}, out: newRecWriter(e.stdout)}
	if s.Fenced {
		w.fence = &fence{path: *ledger}
	}
	c, _, err := open(ctx, g, e, locker.WithTTL(s.TTL.std()), locker.WithObserver(w.obs))
	if err != nil {
		w.out.put(loadRec{K: "e", W: w.id, M: err.Error()}, true)
		return err
	}
	w.c = c
	defer c.Close()
	pause(ctx, time.Until(time.Unix(0, *from)))

	ticks := make(chan struct{})
	go func() {
		defer close(ticks)
		w.counters(ctx)
	}()
	if s.Mode == "http" {
		err = w.serveHTTP(ctx)
	} else {
		w.mutexes(ctx)
	}
	cancel()
	<-ticks
	w.out.flush()
	return err
}

// counters reports the counters every second, and once more at the end.
func (w *loadWorker) counters(ctx context.Context) {
	var last [5]int64
	emit := func() {
		now := [5]int64{w.obs.ren.Load(), w.obs.rerr.Load(), w.obs.lost.Load(), w.errors.Load(), w.drops.Load()}
		w.out.put(loadRec{K: "c", W: w.id, At: time.Now().UnixNano(),
			Ren: now[0] - last[0], RErr: now[1] - last[1], Lost: now[2] - last[2], Err: now[3] - last[3], Drop: now[4] - last[4]}, true)
		last = now
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	flush := time.NewTicker(100 * time.Millisecond)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			emit()
			return
		case <-flush.C:
			w.out.flush()
		case <-t.C:
			emit()
		}
	}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	if d > 0 {
		driverkit.Sleep(ctx, d)
	}
}

func (w *loadWorker) fail(err error) {
	w.errors.Add(1)
	w.out.put(loadRec{K: "e", W: w.id, M: err.Error()}, false)
}

// mutexes runs the handles of mode mutex until ctx ends.
func (w *loadWorker) mutexes(ctx context.Context) {
	var wg sync.WaitGroup
	for h := range w.s.Handles {
		wg.Go(func() {
			p := newPicker(w.s, w.id, h, time.Now().UnixNano()+int64(w.id*1000+h))
			for ctx.Err() == nil {
				w.once(ctx, p.next())
				pause(ctx, w.s.Think.std())
			}
		})
	}
	wg.Wait()
}

// once takes name n, holds it, writes to the fence if any, releases it.
func (w *loadWorker) once(ctx context.Context, n int) {
	m := w.c.NewMutex(nameOf(w.run, n))
	q := time.Now()
	if err := m.Lock(ctx); err != nil {
		if ctx.Err() == nil {
			w.fail(err)
			pause(ctx, 50*time.Millisecond)
		}
		return
	}
	rec := loadRec{K: "h", W: w.id, N: n, Q: q.UnixNano(), A: time.Now().UnixNano(), T: m.Token()}
	if w.s.Fault != nil {
		// The coordinator picks its victims among the holders it hears of.
		w.out.put(loadRec{K: "s", W: w.id, N: n, A: rec.A, T: rec.T}, true)
	}
	pause(ctx, w.s.Hold.std()) // the work; a stopped worker resumes here
	rec.F = w.write(n, rec.T)
	rec.R = time.Now().UnixNano()
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := m.Unlock(uctx); errors.Is(err, locker.ErrLost) {
		rec.L = true
	} else if err != nil {
		w.fail(err)
	}
	w.out.put(rec, w.s.Fault != nil)
}

// write writes to the fenced resource, if the scenario has one.
func (w *loadWorker) write(n int, token uint64) int {
	if w.fence == nil {
		return 0
	}
	ok, err := w.fence.write(n, token)
	switch {
	case err != nil:
		w.fail(err)
		return 0
	case ok:
		return fenceAccepted
	}
	return fenceRefused
}

// maxInFlight bounds the requests of mode http that wait for an answer;
// a request due when that many wait is dropped (and counted).
const maxInFlight = 2000

// serveHTTP runs mode http: a server behind locker.Middleware, and an
// open-loop client that sends it requests at the scenario's rate.
func (w *loadWorker) serveHTTP(ctx context.Context) error {
	key := func(r *http.Request) (string, error) {
		n, err := strconv.Atoi(r.PathValue("n"))
		if err != nil {
			return "", err
		}
		return nameOf(w.run, n), nil
	}
	handler := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		a := time.Now()
		n, _ := strconv.Atoi(r.PathValue("n"))
		q, _ := strconv.ParseInt(r.Header.Get("X-Load-Start"), 10, 64)
		rec := loadRec{K: "h", W: w.id, N: n, Q: q, A: a.UnixNano()}
		if h, ok := locker.HoldFromContext(r.Context()); ok {
			rec.T = h.Token()
		}
		pause(r.Context(), w.s.Hold.std())
		rec.F = w.write(n, rec.T)
		rec.R = time.Now().UnixNano()
		w.out.put(rec, false)
		rw.WriteHeader(http.StatusNoContent)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /k/{n}", locker.Middleware(w.c, key)(handler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String() + "/k/"
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	p := newPicker(w.s, w.id, 0, time.Now().UnixNano()+int64(w.id))
	interval := time.Duration(float64(time.Second) * float64(w.s.Workers) / w.s.Rate)
	var inflight atomic.Int64
	var wg sync.WaitGroup
	next := time.Now()
	for ctx.Err() == nil {
		next = next.Add(interval)
		pause(ctx, time.Until(next))
		if ctx.Err() != nil {
			break
		}
		if inflight.Load() >= maxInFlight {
			w.drops.Add(1)
			continue
		}
		inflight.Add(1)
		n := p.next()
		wg.Go(func() {
			defer inflight.Add(-1)
			q := time.Now()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+strconv.Itoa(n), nil)
			if err != nil {
				w.fail(err)
				return
			}
			req.Header.Set("X-Load-Start", strconv.FormatInt(q.UnixNano(), 10))
			resp, err := client.Do(req)
			if err != nil {
				if ctx.Err() == nil {
					w.fail(err)
				}
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent && ctx.Err() == nil {
				w.errors.Add(1)
				w.out.put(loadRec{K: "h", W: w.id, N: n, Q: q.UnixNano(), S: resp.StatusCode}, false)
			}
		})
	}
	wg.Wait()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	tr.CloseIdleConnections()
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// fence is the resource a fenced scenario's holds write to: a file that
// accepts a write for a name only with a token at least as high as any it
// has accepted for that name. The check-and-write is atomic across
// processes (flock), as a storage server's compare-and-set would be. Each
// accepted write is appended to path.log, so that the order can be checked
// afterwards.
type fence struct{ path string }

type fenceState struct {
	Highest  map[string]uint64 `json:"highest"`
	Accepted int               `json:"accepted"`
	Refused  int               `json:"refused"`
}

func (f *fence) write(n int, token uint64) (accepted bool, err error) {
	lf, err := os.OpenFile(f.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false, err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return false, err
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	st := fenceState{Highest: map[string]uint64{}}
	if b, err := os.ReadFile(f.path); err == nil {
		if err := json.Unmarshal(b, &st); err != nil {
			return false, err
		}
	}
	k := strconv.Itoa(n)
	if token < st.Highest[k] {
		st.Refused++
	} else {
		st.Highest[k], accepted = token, true
		st.Accepted++
		log, err := os.OpenFile(f.path+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return false, err
		}
		_, err = log.WriteString(k + " " + strconv.FormatUint(token, 10) + "\n")
		if cerr := log.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return false, err
		}
	}
	b, err := json.Marshal(&st)
	if err != nil {
		return false, err
	}
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return false, err
	}
	return accepted, os.Rename(tmp, f.path)
}
