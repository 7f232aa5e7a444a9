package lockadmin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

// cookieName is the cookie of a browser that logged in with the bearer
// token.
const cookieName = "lockadmin_session"

var (
	errUnauthenticated = &httpError{code: http.StatusUnauthorized, msg: "lockadmin: authentication required"}
	errNotLocal        = &httpError{code: http.StatusForbidden, msg: "lockadmin: no authentication is configured, so only loopback clients are served (configure a bearer token or basic auth)"}
)

// authenticate returns who asked, for the audit log, or why the request
// is refused.
func (h *Handler) authenticate(r *http.Request) (string, error) {
	if !h.cfg.authenticated() {
		if !localRequest(r) {
			return "", errNotLocal
		}
		return "local", nil
	}
	if h.cfg.token != "" {
		if tok, ok := bearerToken(r); ok && equal(tok, h.cfg.token) {
			return "token", nil
		}
		if c, err := r.Cookie(cookieName); err == nil && equal(c.Value, h.session) {
			return "token", nil
		}
	}
	if h.cfg.user != "" {
		if u, p, ok := r.BasicAuth(); ok {
			// Both comparisons always run, so the time does not tell
			// which one failed.
			uok := equal(u, h.cfg.user)
			pok := equal(p, h.cfg.password)
			if uok && pok {
				return u, nil
			}
		}
	}
	if h.cfg.authn != nil {
		if u, ok := h.cfg.authn(r); ok {
			if u == "" {
				u = "authenticated"
			}
			return u, nil
		}
	}
	return "", errUnauthenticated
}

// equal compares secrets in constant time, whatever their lengths.
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

func bearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// localRequest reports whether r comes from a loopback client, to a
// loopback host name, not relayed by a proxy. The host check stops DNS
// rebinding: a web page whose name resolves to 127.0.0.1 still sends its
// own name in Host.
func localRequest(r *http.Request) bool {
	for _, hd := range []string{"Forwarded", "X-Forwarded-For", "X-Real-Ip"} {
		if r.Header.Get(hd) != "" {
			return false
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return false
	}
	return loopbackHost(r.Host)
}

// loopbackHost reports whether the host (with or without a port) is
// "localhost" or a loopback IP address.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// refuseAuth answers a request that authenticate refused. A browser that
// asks for the page gets the login form when a bearer token is configured.
func (h *Handler) refuseAuth(w http.ResponseWriter, r *http.Request, err error) {
	code := errorCode(err)
	if code == http.StatusUnauthorized {
		if h.cfg.user != "" {
			w.Header().Add("WWW-Authenticate", `Basic realm="lockadmin", charset="UTF-8"`)
		}
		if h.cfg.token != "" {
			w.Header().Add("WWW-Authenticate", `Bearer realm="lockadmin"`)
			if r.Method == http.MethodGet && r.URL.Path == "/" {
				h.loginPage(w, code, "")
				return
			}
		}
	}
	writeError(w, code, err.Error())
}

func (h *Handler) loginPage(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = pages.ExecuteTemplate(w, "login.html", struct{ Error string }{msg})
}

// login checks the bearer token typed in the login form and, when it is
// right, sets the session cookie: browsers cannot send a bearer token on
// their own.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if h.cfg.token == "" {
		http.NotFound(w, r)
		return
	}
	if err := h.cop.Check(r); err != nil {
		writeError(w, http.StatusForbidden, "lockadmin: cross-origin request refused")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "lockadmin: bad login form")
		return
	}
	if !equal(r.PostForm.Get("token"), h.cfg.token) {
		h.loginPage(w, http.StatusUnauthorized, "Wrong token.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     cookieName,
		Value:    h.session,
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	// Not http.Redirect: it would resolve "./" against the path after
	// http.StripPrefix, not the one the browser sees.
	w.Header().Set("Location", "./")
	w.WriteHeader(http.StatusSeeOther)
}
