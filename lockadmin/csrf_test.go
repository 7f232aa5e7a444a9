package lockadmin

import (
	"net/http"
	"strings"
	"testing"
)

func TestReleaseCSRF(t *testing.T) {
	tests := []struct {
		name string
		edit func(*http.Request)
		code int
		msg  string
	}{
		{"a_request_without_the_token_is_refused", func(r *http.Request) { r.Header.Del(csrfHeader) }, 403, "missing CSRF token"},
		{"a_request_with_a_wrong_token_is_refused", func(r *http.Request) { r.Header.Set(csrfHeader, strings.Repeat("0", 32)) }, 403, "wrong CSRF token"},
		{"a_cross-site_request_is_refused", func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, 403, "cross-origin"},
		{"a_same-site_request_from_another_origin_is_refused", func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "same-site") }, 403, "cross-origin"},
		{"a_request_from_another_origin_is_refused", func(r *http.Request) {
			r.Header.Del("Sec-Fetch-Site")
			r.Header.Set("Origin", "https://evil.example")
		}, 403, "cross-origin"},
		{"an_origin_that_only_looks_local_is_refused", func(r *http.Request) {
			r.Header.Del("Sec-Fetch-Site")
			r.Header.Set("Origin", "http://localhost.evil.example:8080")
		}, 403, "cross-origin"},
		{"a_form_post_is_refused", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 415, "application/json"},
		{"a_same-origin_request_with_the_token_goes_through", func(*http.Request) {}, 200, "released"},
		{"a_non-browser_client_with_the_token_goes_through", func(r *http.Request) {
			r.Header.Del("Sec-Fetch-Site")
			r.Header.Del("Origin")
		}, 200, "released"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t)
			m := hold(t, c, "jobs/a")
			var log auditLog
			h := newHandler(t, c, WithBasicAuth("ops", "pw"), WithAuditLog(log.logger()))
			row := current(t, newHandler(t, c), "jobs/a")
			r := releaseReq(h, "jobs/a", row.Owner, row.Token, "test")
			r.SetBasicAuth("ops", "pw")
			tt.edit(r)
			w := serve(h, r)
			if w.Code != tt.code || !strings.Contains(w.Body.String(), tt.msg) {
				t.Fatalf("status %d %s, want %d and %q", w.Code, w.Body, tt.code, tt.msg)
			}
			rec := log.last(t)
			if tt.code != 200 {
				if rec["outcome"] != outCSRF && rec["outcome"] != outBadRequest {
					t.Errorf("audit %v, want a CSRF refusal", rec)
				}
				select {
				case <-m.Lost():
					t.Error("a refused release freed the lock")
				default:
				}
			} else if rec["outcome"] != outReleased || rec["user"] != "ops" {
				t.Errorf("audit %v, want released by ops", rec)
			}
		})
	}
}
