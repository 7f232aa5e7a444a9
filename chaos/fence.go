package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// fence is the resource the lock guards, owned by the coordinator and
// served on loopback: one counter per lock name, changed by a
// read-modify-write under the lock. Both requests carry the holder's
// fencing token, and the fence refuses any whose token is below the
// highest it has seen for that name (a read registers its token too, so a
// stale holder whose read came before the new holder's cannot write after
// it). An accepted write whose expected value is not the counter's is a
// lost update: two holders' read-modify-writes interleaved.
type fence struct {
	mu    sync.Mutex
	names map[string]*fenceState
	srv   *http.Server
	ln    net.Listener
	done  chan struct{}
}

type fenceState struct {
	value, highest                  int64
	accepted, refused, readsRefused int
	lostUpdates                     int
	// outOfOrder counts accepted writes whose token was below the one of
	// the previous accepted write: the fence's own invariant.
	outOfOrder int
	lastWrite  int64
}

// fenceStats are the fence's counts over all names.
type fenceStats struct {
	Accepted     int `json:"accepted"`
	Refused      int `json:"refused"`
	ReadsRefused int `json:"reads_refused"`
	LostUpdates  int `json:"lost_updates"`
	OutOfOrder   int `json:"out_of_order"`
}

func startFence() (*fence, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &fence{names: make(map[string]*fenceState), ln: ln, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /read", f.handle(f.read))
	mux.HandleFunc("POST /write", f.handle(f.write))
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(f.done)
		_ = f.srv.Serve(ln)
	}()
	return f, nil
}

func (f *fence) url() string { return "http://" + f.ln.Addr().String() }

func (f *fence) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := f.srv.Shutdown(ctx); err != nil {
		_ = f.srv.Close()
	}
	<-f.done
}

func (f *fence) handle(op func(st *fenceState, token, expect, value int64) map[string]int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		num := func(k string) (int64, error) {
			if q.Get(k) == "" {
				return 0, nil
			}
			return strconv.ParseInt(q.Get(k), 10, 64)
		}
		token, err1 := num("token")
		expect, err2 := num("expect")
		value, err3 := num("value")
		if err := errors.Join(err1, err2, err3); err != nil || q.Get("name") == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		st := f.names[q.Get("name")]
		if st == nil {
			st = &fenceState{}
			f.names[q.Get("name")] = st
		}
		res := op(st, token, expect, value)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	}
}

func (f *fence) read(st *fenceState, token, _, _ int64) map[string]int64 {
	if token < st.highest {
		st.readsRefused++
		return map[string]int64{"ok": 0, "highest": st.highest}
	}
	st.highest = token
	return map[string]int64{"ok": 1, "value": st.value}
}

func (f *fence) write(st *fenceState, token, expect, value int64) map[string]int64 {
	if token < st.highest {
		st.refused++
		return map[string]int64{"ok": 0, "highest": st.highest}
	}
	if token < st.lastWrite {
		st.outOfOrder++
	}
	st.highest, st.lastWrite = token, token
	st.accepted++
	if st.value != expect {
		st.lostUpdates++
	}
	st.value = value
	return map[string]int64{"ok": 1}
}

func (f *fence) stats() fenceStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s fenceStats
	for _, st := range f.names {
		s.Accepted += st.accepted
		s.Refused += st.refused
		s.ReadsRefused += st.readsRefused
		s.LostUpdates += st.lostUpdates
		s.OutOfOrder += st.outOfOrder
	}
	return s
}
