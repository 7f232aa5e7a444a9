package lockadmin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golocker/locker"
)

// releaseReq is a well-formed release request from the page.
func releaseReq(h *Handler, name, owner string, token uint64, reason string) *http.Request {
	body, _ := json.Marshal(map[string]string{"name": name, "owner": owner, "token": strconv.FormatUint(token, 10), "reason": reason})
	r := localReq("POST", "/api/release", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	r.Header.Set("Origin", "http://"+r.Host)
	r.Header.Set(csrfHeader, h.csrf)
	return r
}

// current returns the hold on name as api/holds lists it.
func current(t *testing.T, h *Handler, name string) holdRow {
	t.Helper()
	ans := decode[holdsAnswer](t, serve(h, localReq("GET", "/api/holds?prefix="+name, nil)))
	for _, r := range ans.Holds {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("%q is not listed", name)
	return holdRow{}
}

// wantAudit checks the fields of an audit record.
func wantAudit(t *testing.T, rec map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		got := rec[k]
		if f, ok := got.(float64); ok {
			got = uint64(f)
		}
		if got != v {
			t.Errorf("audit %s = %v (%T), want %v; record %v", k, rec[k], rec[k], v, rec)
		}
	}
}

func TestRelease(t *testing.T) {
	t.Run("frees_the_lock_and_records_who_what_and_why", func(t *testing.T) {
		c := newClient(t)
		m := hold(t, c, "jobs/stuck")
		var log auditLog
		h := newHandler(t, c, WithAuditLog(log.logger()))
		row := current(t, h, "jobs/stuck")
		token := m.Token()

		w := serve(h, releaseReq(h, "jobs/stuck", row.Owner, row.Token, "worker hung since 03:00"))
		if w.Code != http.StatusOK {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		ans := decode[releaseAnswer](t, w)
		if ans.Released != "jobs/stuck" || ans.Token != token || ans.Owner != row.Owner {
			t.Errorf("answer %+v, want jobs/stuck released from %s, token %d", ans, row.Owner, token)
		}
		select {
		case <-m.Lost():
		case <-time.After(10 * time.Second):
			t.Fatal("the holder did not see its hold lost within 10s")
		}
		if err := m.Unlock(context.Background()); !errors.Is(err, locker.ErrLost) {
			t.Errorf("the holder's Unlock = %v, want ErrLost", err)
		}
		rec := log.last(t)
		wantAudit(t, rec, map[string]any{
			"level": "INFO", "msg": "lockadmin: force release", "outcome": "released",
			"user": "local", "remote": "127.0.0.1:50000", "name": "jobs/stuck",
			"owner": row.Owner, "token": token, "reason": "worker hung since 03:00",
		})
		if _, ok := rec["error"]; ok {
			t.Errorf("a release that worked has an error: %v", rec)
		}
		if hs, _ := c.Holds(context.Background(), ""); len(hs) != 0 {
			t.Errorf("holds after the release: %v", hs)
		}
	})

	refusals := []struct {
		name    string
		opts    []Option
		edit    func(r *http.Request, h *Handler, row holdRow) *http.Request
		code    int
		outcome string
		msg     string
	}{
		{
			name: "without_a_reason", code: http.StatusBadRequest, outcome: outNoReason, msg: "needs a reason",
			edit: func(_ *http.Request, h *Handler, row holdRow) *http.Request {
				return releaseReq(h, "jobs/stuck", row.Owner, row.Token, "   ")
			},
		},
		{
			name: "on_a_read-only_page", opts: []Option{WithReadOnly()}, code: http.StatusForbidden, outcome: outReadOnly, msg: "read-only",
		},
		{
			name: "outside_the_page_prefix", opts: []Option{WithPrefix("other/")}, code: http.StatusForbidden, outcome: outOutsidePrefix, msg: "outside",
		},
		{
			name: "when_the_lock_changed_hands", code: http.StatusConflict, outcome: outChanged, msg: "changed hands",
			edit: func(_ *http.Request, h *Handler, row holdRow) *http.Request {
				return releaseReq(h, "jobs/stuck", row.Owner, row.Token-1, "stale page")
			},
		},
		{
			name: "when_the_lock_is_free", code: http.StatusNotFound, outcome: outNotHeld, msg: "not held",
			edit: func(_ *http.Request, h *Handler, row holdRow) *http.Request {
				return releaseReq(h, "jobs/free", row.Owner, row.Token, "why not")
			},
		},
		{
			name: "with_a_body_that_is_not_JSON", code: http.StatusUnsupportedMediaType, outcome: outBadRequest, msg: "application/json",
			edit: func(r *http.Request, _ *Handler, _ holdRow) *http.Request {
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				return r
			},
		},
		{
			name: "with_an_unknown_field", code: http.StatusBadRequest, outcome: outBadRequest, msg: "unknown field",
			edit: func(r *http.Request, h *Handler, _ holdRow) *http.Request {
				r2 := localReq("POST", "/api/release", strings.NewReader(`{"name":"jobs/stuck","reason":"x","force":true}`))
				r2.Header = r.Header
				return r2
			},
		},
		{
			name: "with_a_reason_too_long", code: http.StatusBadRequest, outcome: outBadRequest, msg: "longer than",
			edit: func(_ *http.Request, h *Handler, row holdRow) *http.Request {
				return releaseReq(h, "jobs/stuck", row.Owner, row.Token, strings.Repeat("x", maxReason+1))
			},
		},
	}
	for _, tt := range refusals {
		t.Run("is_refused_and_recorded_"+tt.name, func(t *testing.T) {
			c := newClient(t)
			m := hold(t, c, "jobs/stuck")
			var log auditLog
			h := newHandler(t, c, append(tt.opts, WithAuditLog(log.logger()))...)
			row := current(t, newHandler(t, c), "jobs/stuck")
			r := releaseReq(h, "jobs/stuck", row.Owner, row.Token, "because")
			if tt.edit != nil {
				r = tt.edit(r, h, row)
			}
			w := serve(h, r)
			if w.Code != tt.code || !strings.Contains(w.Body.String(), tt.msg) {
				t.Errorf("status %d %s, want %d and %q", w.Code, w.Body, tt.code, tt.msg)
			}
			select {
			case <-m.Lost():
				t.Fatal("the hold was lost")
			default:
			}
			rec := log.last(t)
			wantAudit(t, rec, map[string]any{"level": "WARN", "outcome": tt.outcome, "user": "local"})
			if e, _ := rec["error"].(string); e == "" {
				t.Errorf("the record of a refusal has no error: %v", rec)
			}
		})
	}

	t.Run("a_conflict_says_who_holds_it_now", func(t *testing.T) {
		c := newClient(t)
		hold(t, c, "jobs/stuck")
		var log auditLog
		h := newHandler(t, c, WithAuditLog(log.logger()))
		row := current(t, h, "jobs/stuck")
		w := serve(h, releaseReq(h, "jobs/stuck", "old/1/2/3", row.Token-1, "stale page"))
		ans := decode[changedAnswer](t, w)
		if ans.Owner != row.Owner || ans.Token != row.Token {
			t.Errorf("answer %+v, want the current holder %s and token %d", ans, row.Owner, row.Token)
		}
		wantAudit(t, log.last(t), map[string]any{
			"owner": row.Owner, "token": row.Token, "seen_owner": "old/1/2/3", "seen_token": row.Token - 1,
		})
	})
}

// TestLongNamesAreCutInAnswers: the page's answers about a long name show
// its first bytes and its length, not all of it.
func TestLongNamesAreCutInAnswers(t *testing.T) {
	long := "jobs/" + strings.Repeat("x", 6000) // the body is at most 8 KB
	for _, tc := range []struct {
		name string
		opts []Option
		code int
		msg  string
	}{
		{"not_held", nil, http.StatusNotFound, "is not held"},
		{"outside_the_prefix", []Option{WithPrefix("other/")}, http.StatusForbidden, "is outside this page's prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandler(t, newClient(t), tc.opts...)
			w := serve(h, releaseReq(h, long, "someone", 1, "because"))
			body := w.Body.String()
			if w.Code != tc.code || !strings.Contains(body, tc.msg) || !strings.Contains(body, "(6005 bytes)") || len(body) > 300 {
				t.Errorf("status %d, %d-byte answer %.400s; want %d, %q, the name cut, at most 300 bytes", w.Code, len(body), body, tc.code, tc.msg)
			}
		})
	}
}
