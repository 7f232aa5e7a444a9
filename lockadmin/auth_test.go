package lockadmin

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

const testToken = "0123456789abcdef-token"

func TestAuthentication(t *testing.T) {
	c := newClient(t)
	hold(t, c, "jobs/a")
	bearer := []Option{WithBearerToken(testToken)}
	basic := []Option{WithBasicAuth("ops", "correct horse")}
	both := []Option{WithBearerToken(testToken), WithBasicAuth("ops", "correct horse")}
	custom := []Option{WithAuthenticator(func(r *http.Request) (string, bool) {
		return "alice", r.Header.Get("X-Service-User") == "alice"
	})}
	var open []Option

	remote := func(r *http.Request) *http.Request {
		r.RemoteAddr = "192.0.2.7:40000"
		r.Host = "locks.example.com"
		return r
	}
	withBearer := func(tok string) func(*http.Request) *http.Request {
		return func(r *http.Request) *http.Request {
			r.Header.Set("Authorization", "Bearer "+tok)
			return remote(r)
		}
	}
	withBasic := func(u, p string) func(*http.Request) *http.Request {
		return func(r *http.Request) *http.Request {
			r.SetBasicAuth(u, p)
			return remote(r)
		}
	}
	tests := []struct {
		name      string
		opts      []Option
		edit      func(*http.Request) *http.Request
		code      int
		challenge string // in WWW-Authenticate
	}{
		{"bearer_without_credentials_is_401", bearer, remote, 401, "Bearer"},
		{"bearer_with_a_wrong_token_is_401", bearer, withBearer(testToken + "x"), 401, "Bearer"},
		{"bearer_with_a_prefix_of_the_token_is_401", bearer, withBearer(testToken[:10]), 401, "Bearer"},
		{"bearer_with_basic_credentials_is_401", bearer, withBasic("ops", testToken), 401, "Bearer"},
		{"bearer_with_the_token_is_served", bearer, withBearer(testToken), 200, ""},
		{"basic_without_credentials_is_401", basic, remote, 401, "Basic"},
		{"basic_with_a_wrong_password_is_401", basic, withBasic("ops", "wrong"), 401, "Basic"},
		{"basic_with_a_wrong_user_is_401", basic, withBasic("root", "correct horse"), 401, "Basic"},
		{"basic_with_the_password_is_served", basic, withBasic("ops", "correct horse"), 200, ""},
		{"either_method_works_when_both_are_set_bearer", both, withBearer(testToken), 200, ""},
		{"either_method_works_when_both_are_set_basic", both, withBasic("ops", "correct horse"), 200, ""},
		{"both_challenges_are_offered", both, remote, 401, "Basic"},
		{"the_service_authenticator_refuses", custom, remote, 401, ""},
		{"the_service_authenticator_accepts", custom, func(r *http.Request) *http.Request {
			r.Header.Set("X-Service-User", "alice")
			return remote(r)
		}, 200, ""},
		{"no_auth_refuses_a_remote_client", open, remote, 403, ""},
		{"no_auth_refuses_a_loopback_client_naming_another_host", open, func(r *http.Request) *http.Request {
			r.Host = "rebind.attacker.example:8080"
			return r
		}, 403, ""},
		{"no_auth_refuses_a_request_relayed_by_a_proxy", open, func(r *http.Request) *http.Request {
			r.Header.Set("X-Forwarded-For", "203.0.113.9")
			return r
		}, 403, ""},
		{"no_auth_serves_a_loopback_client", open, func(r *http.Request) *http.Request { return r }, 200, ""},
		{"no_auth_serves_localhost_over_IPv6", open, func(r *http.Request) *http.Request {
			r.RemoteAddr, r.Host = "[::1]:50000", "[::1]:8080"
			return r
		}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log auditLog
			h := newHandler(t, c, append(tt.opts, WithAuditLog(log.logger()))...)
			for _, path := range []string{"/api/holds", "/api/stats", "/"} {
				w := serve(h, tt.edit(localReq("GET", path, nil)))
				if w.Code != tt.code {
					t.Errorf("GET %s: status %d, want %d; body %.200s", path, w.Code, tt.code, w.Body)
				}
				if got := strings.Join(w.Header().Values("WWW-Authenticate"), ", "); !strings.Contains(got, tt.challenge) {
					t.Errorf("GET %s: WWW-Authenticate %q, want %q", path, got, tt.challenge)
				}
			}
			// A release is refused just the same, and recorded.
			if tt.code != 200 {
				w := serve(h, tt.edit(releaseReq(h, "jobs/a", "o", 1, "r")))
				if w.Code != tt.code {
					t.Errorf("POST api/release: status %d, want %d", w.Code, tt.code)
				}
				if out := log.last(t)["outcome"]; !strings.HasPrefix(out.(string), "refused_") {
					t.Errorf("audit outcome %v, want a refusal", out)
				}
			}
		})
	}
}

func TestLoginForm(t *testing.T) {
	c := newClient(t)
	h := newHandler(t, c, WithBearerToken(testToken))
	remote := func(r *http.Request) *http.Request {
		r.RemoteAddr, r.Host = "192.0.2.7:40000", "locks.example.com"
		return r
	}

	page := serve(h, remote(localReq("GET", "/", nil)))
	if page.Code != 401 || !strings.Contains(page.Body.String(), `name="token"`) {
		t.Fatalf("GET / without the token: %d, want 401 and the login form:\n%s", page.Code, page.Body)
	}

	login := func(tok string, edit func(*http.Request)) *http.Request {
		r := remote(localReq("POST", "/login", strings.NewReader(url.Values{"token": {tok}}.Encode())))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Sec-Fetch-Site", "same-origin")
		if edit != nil {
			edit(r)
		}
		return r
	}
	if w := serve(h, login("wrong-token-wrong-token", nil)); w.Code != 401 || len(w.Result().Cookies()) != 0 || !strings.Contains(w.Body.String(), "Wrong token") {
		t.Errorf("a wrong token: %d, cookies %v; want 401, no cookie, a message", w.Code, w.Result().Cookies())
	}
	if w := serve(h, login(testToken, func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") })); w.Code != 403 || len(w.Result().Cookies()) != 0 {
		t.Errorf("a cross-site login: %d, want 403 and no cookie", w.Code)
	}
	w := serve(h, login(testToken, nil))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "./" {
		t.Fatalf("the right token: %d to %q, want 303 to ./", w.Code, w.Header().Get("Location"))
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || strings.Contains(cookies[0].Value, testToken) {
		t.Fatalf("cookies %v: want one HttpOnly, SameSite=Strict cookie that is not the token", cookies)
	}
	r := remote(localReq("GET", "/api/holds", nil))
	r.AddCookie(cookies[0])
	if w := serve(h, r); w.Code != 200 {
		t.Errorf("api/holds with the session cookie: %d, want 200", w.Code)
	}
	r = remote(localReq("GET", "/api/holds", nil))
	r.AddCookie(&http.Cookie{Name: cookieName, Value: strings.Repeat("0", len(cookies[0].Value))})
	if w := serve(h, r); w.Code != 401 {
		t.Errorf("api/holds with a forged cookie: %d, want 401", w.Code)
	}
	// Another handler (another process) does not accept this one's cookie.
	r = remote(localReq("GET", "/api/holds", nil))
	r.AddCookie(cookies[0])
	if w := serve(newHandler(t, c, WithBearerToken(testToken)), r); w.Code != 401 {
		t.Errorf("another handler took the cookie: %d, want 401", w.Code)
	}
	if w := serve(newHandler(t, c, WithBasicAuth("u", "p")), login(testToken, nil)); w.Code != 404 {
		t.Errorf("login without a bearer token configured: %d, want 404", w.Code)
	}
}

func TestOptions(t *testing.T) {
	c := newClient(t)
	for _, tt := range []struct {
		name string
		opt  Option
	}{
		{"a_short_token", WithBearerToken("short")},
		{"basic_auth_without_a_password", WithBasicAuth("ops", "")},
		{"basic_auth_without_a_user", WithBasicAuth("", "pw")},
		{"a_user_with_a_colon", WithBasicAuth("a:b", "pw")},
		{"a_nil_authenticator", WithAuthenticator(nil)},
		{"a_nil_audit_log", WithAuditLog(nil)},
		{"a_nil_recorder", WithRecorder(nil)},
		{"a_nil_option", nil},
		{"a_short_secret", WithSecret([]byte("too short"))},
	} {
		t.Run(tt.name+"_is_refused", func(t *testing.T) {
			if _, err := New(c, tt.opt); !errors.Is(err, ErrInvalidOption) {
				t.Errorf("New: %v, want ErrInvalidOption", err)
			}
		})
	}
	if _, err := New(nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("New(nil): %v, want ErrInvalidOption", err)
	}
}

func TestSharedSecret(t *testing.T) {
	c := newClient(t)
	secret := []byte("0123456789abcdef0123456789abcdef-shared")
	a := newHandler(t, c, WithBearerToken(testToken), WithSecret(secret))
	b := newHandler(t, c, WithBearerToken(testToken), WithSecret(secret))
	other := newHandler(t, c, WithBearerToken(testToken), WithSecret([]byte(strings.Repeat("x", MinSecretLen))))
	if a.csrf != b.csrf || a.session != b.session {
		t.Error("two replicas with the same secret have different CSRF tokens or session cookies")
	}
	if a.csrf == other.csrf || a.session == other.session {
		t.Error("another secret gives the same CSRF token or session cookie")
	}
	if strings.Contains(a.csrf, string(secret[:8])) || strings.Contains(a.session, testToken) {
		t.Error("the secret or the token shows in what the browser gets")
	}
	// A release from a page of replica a, answered by replica b.
	hold(t, c, "jobs/a")
	row := current(t, newHandler(t, c), "jobs/a")
	r := releaseReq(a, "jobs/a", row.Owner, row.Token, "replica b answers")
	r.Header.Set("Authorization", "Bearer "+testToken)
	if w := serve(b, r); w.Code != http.StatusOK {
		t.Errorf("replica b refused replica a's page: %d %s", w.Code, w.Body)
	}
}
