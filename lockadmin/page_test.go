package lockadmin

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/locallock"
)

func TestPage(t *testing.T) {
	c := newClient(t)
	hold(t, c, "jobs/a")
	h := newHandler(t, c, WithBackendURL("redis://ops:s3cretpw@10.0.0.5:6379/0?tls_password=k3y"), WithPrefix("jobs/"))

	w := serve(h, localReq("GET", "/", nil))
	if w.Code != 200 || w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	page := w.Body.String()

	t.Run("carries_the_CSRF_token_and_the_redacted_backend", func(t *testing.T) {
		if !strings.Contains(page, `<meta name="csrf-token" content="`+h.csrf+`">`) {
			t.Error("the page lacks the CSRF token")
		}
		if !strings.Contains(page, "redis://ops:xxxxx@10.0.0.5:6379/0") {
			t.Errorf("the page does not show the redacted URL:\n%s", page)
		}
	})

	t.Run("sets_the_security_headers", func(t *testing.T) {
		for _, path := range []string{"/", "/api/holds", "/static/app.js", "/nope"} {
			hd := serve(h, localReq("GET", path, nil)).Header()
			csp := hd.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("%s: CSP %q lacks %q", path, csp, want)
				}
			}
			if hd.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s: X-Content-Type-Options %q", path, hd.Get("X-Content-Type-Options"))
			}
		}
	})

	t.Run("serves_its_script_and_style", func(t *testing.T) {
		for path, ct := range map[string]string{"/static/app.js": "text/javascript", "/static/app.css": "text/css", "/static/icon.svg": "image/svg+xml"} {
			w := serve(h, localReq("GET", path, nil))
			if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), ct) || w.Body.Len() < 200 {
				t.Errorf("GET %s: %d %q, %d bytes", path, w.Code, w.Header().Get("Content-Type"), w.Body.Len())
			}
		}
	})

	t.Run("says_the_holder_is_told_at_once_where_the_store_pushes_the_loss", func(t *testing.T) {
		if !strings.Contains(page, "data-lost-pushed") || !strings.Contains(page, "tells the holder at once") || strings.Contains(page, `id="c-window"`) {
			t.Error("the page of a backend that pushes losses does not say the holder is told at once")
		}
	})

	t.Run("says_how_to_enable_charts_without_a_recorder", func(t *testing.T) {
		if !strings.Contains(page, "lockadmin.NewRecorder()") || strings.Contains(page, `id="charts"`) {
			t.Error("the page without a recorder does not say how to get charts")
		}
		st := decode[map[string]any](t, serve(h, localReq("GET", "/api/stats", nil)))
		if st["enabled"] != false {
			t.Errorf("api/stats without a recorder: %v", st)
		}
		hr := newHandler(t, c, WithRecorder(NewRecorder()))
		if p := serve(hr, localReq("GET", "/", nil)).Body.String(); !strings.Contains(p, `id="charts"`) {
			t.Error("the page with a recorder has no charts")
		}
	})
}

// externalRef finds URLs that would make the browser fetch from elsewhere.
var externalRef = regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)

func TestPageNeedsNoNetwork(t *testing.T) {
	c := newClient(t)
	h := newHandler(t, c, WithRecorder(NewRecorder()), WithBearerToken(testToken))
	r := localReq("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+testToken)
	texts := map[string]string{
		"the page":       serve(h, r).Body.String(),
		"the login page": serve(h, localReq("GET", "/", nil)).Body.String(),
	}
	err := fs.WalkDir(uiFS, "ui", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(uiFS, path)
		texts[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range texts {
		// The SVG namespace is a name, never fetched.
		text = strings.ReplaceAll(text, "'http://www.w3.org/2000/svg'", "")
		text = strings.ReplaceAll(text, `xmlns="http://www.w3.org/2000/svg"`, "")
		if m := externalRef.FindAllString(text, -1); len(m) > 0 {
			t.Errorf("%s refers to other hosts: %v", name, m)
		}
		for _, bad := range []string{"@import", "url(", "<iframe", "fonts.googleapis", "cdn"} {
			if strings.Contains(strings.ToLower(text), bad) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
	}
	if len(texts) < 6 {
		t.Errorf("checked only %d texts", len(texts))
	}
}

func TestPasswordIsNeverShown(t *testing.T) {
	c := newClient(t)
	hold(t, c, "jobs/a")
	var log auditLog
	h := newHandler(t, c, WithBackendURL("postgres://app:s3cretpw@db:5432/locks?password=s3cretpw"), WithAuditLog(log.logger()))
	row := current(t, h, "jobs/a")
	var seen strings.Builder
	for _, path := range []string{"/", "/api/holds", "/api/stats"} {
		seen.WriteString(serve(h, localReq("GET", path, nil)).Body.String())
	}
	seen.WriteString(serve(h, releaseReq(h, "jobs/a", row.Owner, row.Token, "")).Body.String())
	seen.WriteString(serve(h, releaseReq(h, "jobs/a", row.Owner, row.Token, "done")).Body.String())
	log.mu.Lock()
	seen.WriteString(log.buf.String())
	log.mu.Unlock()
	if strings.Contains(seen.String(), "s3cretpw") {
		t.Errorf("the password was shown:\n%s", seen.String())
	}
	if !strings.Contains(seen.String(), "postgres://app:xxxxx@db:5432/locks") {
		t.Error("the redacted URL is not shown")
	}
}

// noPush is a driver that does not push losses (Capabilities.LostSignal
// false), as the SQL and MongoDB drivers.
type noPush struct{ backend.Driver }

func (d noPush) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	c.LostSignal = false
	return c
}

// TestPageSaysWhenTheHolderLearnsLate: where the store does not push a
// loss, the force-release dialog says that the holder learns it at its
// next renewal and may act as the holder until then.
func TestPageSaysWhenTheHolderLearnsLate(t *testing.T) {
	c, err := locker.New(noPush{locallock.New(locallock.NewStore())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	page := serve(newHandler(t, c), localReq("GET", "/", nil)).Body.String()
	if strings.Contains(page, "data-lost-pushed") || !strings.Contains(page, `id="c-window"`) ||
		!strings.Contains(page, "at its next renewal, up to a third of its lease later") || !strings.Contains(page, "may still act as the holder") {
		t.Errorf("the dialog of a backend that does not push losses does not state the window:\n%s", page)
	}
}
