package lockadmin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/golocker/locker"
	"github.com/golocker/locker/locallock"
)

// Clients and the waiter counts start goroutines: none may be left behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newClient returns a Client on a fresh in-process store, closed when the
// test ends.
func newClient(t *testing.T) *locker.Client {
	t.Helper()
	return newClientOn(t, locallock.NewStore())
}

// newClientOn returns a Client of store, closed when the test ends.
func newClientOn(t *testing.T, store *locallock.Store) *locker.Client {
	t.Helper()
	c, err := locker.New(locallock.New(store), locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// hold takes name on c and returns the handle, unlocked when the test ends
// (if still held).
func hold(t *testing.T, c *locker.Client, name string) *locker.Mutex {
	t.Helper()
	m := c.NewMutex(name)
	if err := m.Lock(context.Background()); err != nil {
		t.Fatalf("lock %q: %v", name, err)
	}
	t.Cleanup(func() { _ = m.Unlock(context.Background()) })
	return m
}

func newHandler(t *testing.T, c *locker.Client, opts ...Option) *Handler {
	t.Helper()
	h, err := New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// auditLog is a slog destination a test reads back as records.
type auditLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (a *auditLog) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(a, nil))
}

func (a *auditLog) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.buf.Write(p)
}

func (a *auditLog) records(t *testing.T) []map[string]any {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(a.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

// last returns the last audit record, failing the test if there is none.
func (a *auditLog) last(t *testing.T) map[string]any {
	t.Helper()
	recs := a.records(t)
	if len(recs) == 0 {
		t.Fatal("no audit record")
	}
	return recs[len(recs)-1]
}

// localReq is a request from a loopback client to a loopback host.
func localReq(method, target string, body io.Reader) *http.Request {
	r := httptest.NewRequest(method, target, body)
	r.RemoteAddr = "127.0.0.1:50000"
	r.Host = "127.0.0.1:8080"
	return r
}

// serve runs r through h.
func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// decode decodes a JSON answer, failing the test on a bad one.
func decode[T any](t *testing.T, w *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json; body %s", ct, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("answer %s: %v", w.Body, err)
	}
	return v
}
