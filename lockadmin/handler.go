package lockadmin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"

	"github.com/golocker/locker"
)

//go:embed ui
var uiFS embed.FS

var pages = template.Must(template.ParseFS(uiFS, "ui/*.html"))

// Handler is the admin page and its JSON endpoints. Mount it under a
// prefix with http.StripPrefix; its links are relative. It is safe for
// concurrent use.
type Handler struct {
	c   *locker.Client
	cfg config

	// csrf is the token every state-changing request must carry; session
	// the cookie value of a browser logged in with the bearer token. Both
	// derive from a random secret of this handler, or WithSecret's.
	csrf    string
	session string

	cop    *http.CrossOriginProtection
	static http.Handler
	mux    *http.ServeMux
}

// New returns the admin handler for c. Without an authentication option
// (WithBearerToken, WithBasicAuth, WithAuthenticator) it serves only
// loopback clients; see the package doc.
func New(c *locker.Client, opts ...Option) (*Handler, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil Client", ErrInvalidOption)
	}
	h := &Handler{c: c, cop: http.NewCrossOriginProtection()}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := o(&h.cfg); err != nil {
			return nil, err
		}
	}
	if h.cfg.audit == nil {
		h.cfg.audit = slog.New(slog.DiscardHandler)
	}
	secret := h.cfg.secret
	if secret == nil {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("lockadmin: new: %w", err)
		}
	}
	h.csrf = hex.EncodeToString(derive(secret, "lockadmin csrf")[:16])
	if h.cfg.token != "" {
		h.session = hex.EncodeToString(derive(derive(secret, "lockadmin session"), h.cfg.token))
	}
	static, _ := fs.Sub(uiFS, "ui/static")
	h.static = http.StripPrefix("/static/", http.FileServerFS(static))

	h.mux = http.NewServeMux()
	h.mux.HandleFunc("GET /{$}", h.authed(h.page))
	h.mux.HandleFunc("GET /static/", h.serveStatic)
	h.mux.HandleFunc("POST /login", h.login)
	h.mux.HandleFunc("GET /api/holds", h.authed(h.holds))
	h.mux.HandleFunc("GET /api/stats", h.authed(h.stats))
	h.mux.HandleFunc("POST /api/release", h.release)
	return h, nil
}

// derive returns HMAC-SHA256(key, what): a value tied to key, from which
// key cannot be recovered.
func derive(key []byte, what string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(what))
	return mac.Sum(nil)
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.mux.ServeHTTP(w, r)
}

// authed wraps a handler that needs an authenticated (or, without
// authentication, a loopback) client.
func (h *Handler) authed(next func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, err := h.authenticate(r)
		if err != nil {
			h.refuseAuth(w, r, err)
			return
		}
		next(w, r, who)
	}
}

func (h *Handler) serveStatic(w http.ResponseWriter, r *http.Request) {
	// The page's code and style are not secret, and the login page needs
	// the style before anyone is logged in.
	w.Header().Set("Cache-Control", "no-cache")
	h.static.ServeHTTP(w, r)
}

// pageData is what ui/index.html shows.
type pageData struct {
	CSRF        string
	Backend     string
	Prefix      string
	ReadOnly    bool
	HasRecorder bool
	// LostPushed: the backend tells a holder at once that its hold was
	// released by force (Capabilities.LostSignal); otherwise the holder
	// learns it at its next renewal, and the dialog says so.
	LostPushed bool
}

func (h *Handler) page(w http.ResponseWriter, r *http.Request, _ string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	d := pageData{CSRF: h.csrf, Backend: h.cfg.backend, Prefix: h.cfg.prefix, ReadOnly: h.cfg.readOnly, HasRecorder: h.cfg.rec != nil,
		LostPushed: h.c.Capabilities().LostSignal}
	if err := pages.ExecuteTemplate(w, "index.html", d); err != nil {
		h.cfg.audit.Error("lockadmin: rendering the page", "err", err)
	}
}

func (h *Handler) stats(w http.ResponseWriter, _ *http.Request, _ string) {
	if h.cfg.rec == nil {
		writeJSON(w, http.StatusOK, map[string]any{"enabled": false})
		return
	}
	writeJSON(w, http.StatusOK, h.cfg.rec.Snapshot())
}

// apiError is the body of every error answer of the JSON endpoints.
type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, apiError{Error: msg})
}

// errorCode maps the errors of the checks to HTTP statuses.
func errorCode(err error) int {
	var he *httpError
	if errors.As(err, &he) {
		return he.code
	}
	return http.StatusInternalServerError
}

// httpError is a refusal with its status.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }
