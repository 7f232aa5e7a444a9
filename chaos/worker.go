package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/driverkit"
)

// workerCmd is the hidden first argument that makes this program a worker:
// the coordinator starts each worker as a process of its own, so that a
// worker can be frozen (SIGSTOP) or killed (SIGKILL) as a real client would
// be. The backend's URL comes through the environment (it may hold a
// password, and a command line is visible to every user of the machine).
const workerCmd = "worker"

// Worker timing: how long a worker waits for the lock in one attempt, how
// long it works while holding it (between the fenced read and the fenced
// write), and the bound on one fenced request.
const (
	workerWait     = 5 * time.Second
	workerHoldMin  = 5 * time.Millisecond
	workerHoldMax  = 40 * time.Millisecond
	fenceTimeout   = 3 * time.Second
	workerMaxRound = 1_000_000
)

// event is one line a worker prints on its stdout. T is the wall clock in
// Unix nanoseconds: every process runs on the same machine, so the clocks
// agree; the coordinator's faults are stamped with the same clock.
type event struct {
	T     int64  `json:"t"`
	W     int    `json:"w"`
	Ev    string `json:"ev"` // see the evXxx constants
	Name  string `json:"name,omitempty"`
	Token uint64 `json:"token,omitempty"`
	Msg   string `json:"msg,omitempty"`
}

// Worker events.
const (
	evReady    = "ready"     // the client is open
	evAcqCall  = "acq_call"  // Lock invoked
	evAcqOK    = "acq_ok"    // Lock returned a hold (Token)
	evAcqFail  = "acq_fail"  // Lock returned an error or timed out: no hold
	evWrite    = "write"     // the fenced write was accepted (Msg "ok") or refused ("refused")
	evRelCall  = "rel_call"  // Unlock invoked
	evRelOK    = "rel_ok"    // Unlock returned nil
	evRelLost  = "rel_lost"  // Unlock returned ErrLost or ErrNotHeld: the hold had ended
	evRelError = "rel_error" // Unlock failed otherwise: outcome unknown
	evLost     = "lost"      // Lost() closed while holding
	evError    = "error"     // anything else, for the log
)

func runWorker(args []string) error {
	fs := flag.NewFlagSet(workerCmd, flag.ContinueOnError)
	id := fs.Int("id", 0, "worker number")
	names := fs.String("names", "", "comma-separated lock names")
	fence := fs.String("fence", "", "base URL of the fenced resource")
	ttl := fs.Duration("ttl", 2*time.Second, "lease")
	seed := fs.Uint64("seed", 1, "random seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u := os.Getenv("LOCKER_URL")
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	emit := func(ev, name string, token uint64, msg string) {
		_ = enc.Encode(event{T: time.Now().UnixNano(), W: *id, Ev: ev, Name: name, Token: token, Msg: msg})
		_ = out.Flush()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The coordinator closes stdin to end the worker.
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	octx, ocancel := context.WithTimeout(ctx, 30*time.Second)
	c, err := locker.Open(octx, u, locker.WithTTL(*ttl))
	ocancel()
	if err != nil {
		emit(evError, "", 0, "open: "+err.Error())
		return err
	}
	defer c.Close()
	emit(evReady, "", 0, "")
	rng := rand.New(rand.NewPCG(*seed, uint64(*id)))
	fc := &fenceClient{base: *fence, w: *id, http: &http.Client{Timeout: fenceTimeout}}
	list := strings.Split(*names, ",")
	for range workerMaxRound {
		if ctx.Err() != nil {
			return nil
		}
		name := list[rng.IntN(len(list))]
		m := c.NewMutex(name)
		emit(evAcqCall, name, 0, "")
		ok, err := m.LockTimeout(ctx, workerWait)
		if err != nil || !ok {
			msg := "timed out"
			if err != nil {
				msg = err.Error()
			}
			emit(evAcqFail, name, 0, msg)
			if ctx.Err() != nil {
				return nil
			}
			// A backend that is down fails at once: do not spin.
			driverkit.Sleep(ctx, 50*time.Millisecond)
			continue
		}
		tok := m.Token()
		emit(evAcqOK, name, tok, "")
		// The work: a read-modify-write of the resource's counter, fenced
		// by the token on both requests.
		v, rok, err := fc.read(name, tok)
		if err == nil && rok {
			driverkit.Sleep(ctx, workerHoldMin+rand.N(workerHoldMax-workerHoldMin))
			var wok bool
			wok, err = fc.write(name, tok, v, v+1)
			emit(evWrite, name, tok, map[bool]string{true: "ok", false: "refused"}[wok])
		} else if err == nil {
			emit(evWrite, name, tok, "refused")
		}
		if err != nil {
			emit(evError, name, tok, "fence: "+err.Error())
		}
		select {
		case <-m.Lost():
			emit(evLost, name, tok, "")
		default:
		}
		emit(evRelCall, name, tok, "")
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), workerWait)
		err = m.Unlock(uctx)
		ucancel()
		switch {
		case err == nil:
			emit(evRelOK, name, tok, "")
		case errors.Is(err, locker.ErrLost) || errors.Is(err, locker.ErrNotHeld):
			emit(evRelLost, name, tok, err.Error())
		default:
			emit(evRelError, name, tok, err.Error())
		}
	}
	return nil
}

// fenceClient talks to the coordinator's fenced resource.
type fenceClient struct {
	base string
	w    int
	http *http.Client
}

func (f *fenceClient) do(op, name string, q url.Values) (map[string]int64, error) {
	q.Set("name", name)
	q.Set("w", strconv.Itoa(f.w))
	resp, err := f.http.Post(f.base+"/"+op+"?"+q.Encode(), "text/plain", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fence: %s", resp.Status)
	}
	var r map[string]int64
	return r, json.NewDecoder(resp.Body).Decode(&r)
}

// read registers token as the highest seen and returns the counter, or
// reports that the token is stale.
func (f *fenceClient) read(name string, token uint64) (int64, bool, error) {
	r, err := f.do("read", name, url.Values{"token": {strconv.FormatUint(token, 10)}})
	if err != nil {
		return 0, false, err
	}
	return r["value"], r["ok"] == 1, nil
}

// write sets the counter to v+1 if token is not stale; expect is the value
// read, so that the resource can count lost updates.
func (f *fenceClient) write(name string, token uint64, expect, v int64) (bool, error) {
	r, err := f.do("write", name, url.Values{
		"token":  {strconv.FormatUint(token, 10)},
		"expect": {strconv.FormatInt(expect, 10)},
		"value":  {strconv.FormatInt(v, 10)},
	})
	if err != nil {
		return false, err
	}
	return r["ok"] == 1, nil
}
