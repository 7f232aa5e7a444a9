package lockadmin

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

const (
	// maxRows bounds the holds one answer lists.
	maxRows = 500
	// maxWaiterRows bounds the rows whose waiters one answer counts: a
	// count is a store call, and the page asks every 2 seconds.
	maxWaiterRows = 100
	// waiterCalls bounds the concurrent Waiters calls of one answer.
	waiterCalls = 8
	// storeTimeout bounds the store calls of one request.
	storeTimeout = 10 * time.Second
)

// holdRow is one hold in the answer of api/holds.
type holdRow struct {
	Name  string `json:"name"`
	Owner string `json:"owner"`
	Host  string `json:"host,omitempty"`
	PID   string `json:"pid,omitempty"`
	// Token is a string: JavaScript numbers lose precision above 2^53.
	Token   uint64     `json:"token,string"`
	Expires *time.Time `json:"expires,omitempty"`
	// ExpiresInMS is absent when the hold lives as long as its owner's
	// session.
	ExpiresInMS *int64 `json:"expires_in_ms,omitempty"`
	// Waiters is absent when the driver cannot count them, and after the
	// first maxWaiterRows rows.
	Waiters *int `json:"waiters,omitempty"`
}

// holdsAnswer is the answer of api/holds.
type holdsAnswer struct {
	Time      time.Time `json:"time"`
	Holds     []holdRow `json:"holds"`
	Total     int       `json:"total"`
	Truncated bool      `json:"truncated"`
	// WaitersCounted says whether the driver counts waiters.
	WaitersCounted bool   `json:"waiters_counted"`
	ReadOnly       bool   `json:"read_only"`
	Prefix         string `json:"prefix,omitempty"`
	Backend        string `json:"backend,omitempty"`
	// CSRFToken is what api/release wants in its X-CSRF-Token header.
	CSRFToken string `json:"csrf_token"`
}

// holds answers GET api/holds?prefix=P&q=S: the holds whose names start
// with P (within the handler's own prefix) and contain S, sorted by name.
func (h *Handler) holds(w http.ResponseWriter, r *http.Request, _ string) {
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	q := r.URL.Query()
	ans := holdsAnswer{
		Holds:     []holdRow{},
		ReadOnly:  h.cfg.readOnly,
		Prefix:    h.cfg.prefix,
		Backend:   h.cfg.backend,
		CSRFToken: h.csrf,
	}
	prefix, ok := within(h.cfg.prefix, q.Get("prefix"))
	if !ok {
		ans.Time = time.Now()
		writeJSON(w, http.StatusOK, ans)
		return
	}
	hs, err := h.c.Holds(ctx, prefix)
	if err != nil {
		code, msg := storeError(err, "list locks")
		writeError(w, code, msg)
		return
	}
	ans.Time = time.Now()
	sub := q.Get("q")
	for _, hd := range hs {
		if !strings.HasPrefix(hd.Name, prefix) || !strings.Contains(hd.Name, sub) {
			continue
		}
		ans.Total++
		if len(ans.Holds) < maxRows {
			ans.Holds = append(ans.Holds, row(hd, ans.Time))
		}
	}
	ans.Truncated = ans.Total > len(ans.Holds)
	slices.SortFunc(ans.Holds, func(a, b holdRow) int { return strings.Compare(a.Name, b.Name) })
	if qi, ok := h.c.Driver().(backend.QueueInspector); ok {
		ans.WaitersCounted = true
		countWaiters(ctx, qi, ans.Holds[:min(len(ans.Holds), maxWaiterRows)])
	}
	writeJSON(w, http.StatusOK, ans)
}

// within combines the handler's prefix and the one asked for: the longer,
// when one extends the other; ok is false when they exclude each other.
func within(own, asked string) (string, bool) {
	switch {
	case strings.HasPrefix(asked, own):
		return asked, true
	case strings.HasPrefix(own, asked):
		return own, true
	}
	return "", false
}

func row(hd backend.Hold, now time.Time) holdRow {
	host, pid := parseOwner(hd.Owner)
	rw := holdRow{Name: hd.Name, Owner: hd.Owner, Host: host, PID: pid, Token: hd.Token}
	if !hd.Expires.IsZero() {
		exp := hd.Expires.UTC()
		ms := hd.Expires.Sub(now).Milliseconds()
		rw.Expires, rw.ExpiresInMS = &exp, &ms
	}
	return rw
}

// parseOwner splits an owner of package locker, "host/pid/random/seq",
// into its host and process id; it returns empty strings for an owner of
// another shape.
func parseOwner(owner string) (host, pid string) {
	parts := strings.Split(owner, "/")
	if len(parts) != 4 || parts[0] == "" {
		return "", ""
	}
	if _, err := strconv.ParseUint(parts[1], 10, 32); err != nil {
		return "", ""
	}
	return parts[0], parts[1]
}

// countWaiters fills in the waiters of rows, a few store calls at a time. A
// row whose count fails keeps none.
func countWaiters(ctx context.Context, qi backend.QueueInspector, rows []holdRow) {
	sem := make(chan struct{}, waiterCalls)
	var wg sync.WaitGroup
	for i := range rows {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if n, err := qi.Waiters(ctx, rows[i].Name); err == nil {
				rows[i].Waiters = &n
			}
		}()
	}
	wg.Wait()
}

// storeError maps an error of package locker to a status and a message
// that names no secret.
func storeError(err error, what string) (int, string) {
	switch {
	case errors.Is(err, locker.ErrNotSupported):
		return http.StatusNotImplemented, "lockadmin: the backend cannot " + what
	case errors.Is(err, locker.ErrInvalidName):
		return http.StatusBadRequest, locker.Redact(err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "lockadmin: the backend did not answer in time"
	}
	return http.StatusBadGateway, locker.Redact(err.Error())
}
