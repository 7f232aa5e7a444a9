package lockadmin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/driverkit"
)

// maxReason bounds the reason of a release, in bytes.
const maxReason = 1000

// csrfHeader carries the page's CSRF token on api/release.
const csrfHeader = "X-CSRF-Token"

// Outcomes of a release attempt, as the audit log records them.
const (
	outReleased        = "released"
	outNotHeld         = "not_held"
	outChanged         = "changed_hands"
	outFailed          = "failed"
	outUnauthenticated = "refused_unauthenticated"
	outNotLocal        = "refused_not_local"
	outReadOnly        = "refused_read_only"
	outCSRF            = "refused_csrf"
	outBadRequest      = "refused_bad_request"
	outNoReason        = "refused_no_reason"
	outOutsidePrefix   = "refused_outside_prefix"
)

// releaseRequest is the body of POST api/release: the hold as the operator
// saw it, and why it must go.
type releaseRequest struct {
	Name   string `json:"name"`
	Owner  string `json:"owner"`
	Token  uint64 `json:"token,string"`
	Reason string `json:"reason"`
}

// releaseAnswer is the answer of a release that took place.
type releaseAnswer struct {
	Released string `json:"released"`
	Owner    string `json:"owner"`
	Token    uint64 `json:"token,string"`
}

// changedAnswer is the answer when the lock changed hands since the page
// showed it.
type changedAnswer struct {
	Error string `json:"error"`
	Owner string `json:"owner"`
	Token uint64 `json:"token,string"`
}

// attempt gathers what the audit record of one release attempt says.
type attempt struct {
	user, remote string
	req          releaseRequest
	owner        string // the holder when the handler looked
	token        uint64
	looked       bool
}

func (h *Handler) audit(ctx context.Context, a *attempt, outcome string, err error) {
	level := slog.LevelWarn
	if outcome == outReleased {
		level = slog.LevelInfo
	}
	attrs := []slog.Attr{
		slog.String("outcome", outcome),
		slog.String("user", a.user),
		slog.String("remote", a.remote),
		slog.String("name", a.req.Name),
	}
	if a.looked {
		attrs = append(attrs, slog.String("owner", a.owner), slog.Uint64("token", a.token))
	}
	if a.req.Owner != a.owner || a.req.Token != a.token {
		attrs = append(attrs, slog.String("seen_owner", a.req.Owner), slog.Uint64("seen_token", a.req.Token))
	}
	attrs = append(attrs, slog.String("reason", a.req.Reason))
	if err != nil {
		attrs = append(attrs, slog.String("error", locker.Redact(err.Error())))
	}
	h.cfg.audit.LogAttrs(ctx, level, "lockadmin: force release", attrs...)
}

// release answers POST api/release: it frees a lock by force if the
// holder is still the one the operator saw, and records the attempt in
// the audit log whatever its outcome.
func (h *Handler) release(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	a := &attempt{remote: r.RemoteAddr}
	refuse := func(outcome string, code int, msg string) {
		h.audit(ctx, a, outcome, errors.New(msg))
		writeError(w, code, msg)
	}
	who, err := h.authenticate(r)
	if err != nil {
		// The body is not read: it comes from someone unknown.
		out := outUnauthenticated
		if errorCode(err) == http.StatusForbidden {
			out = outNotLocal
		}
		h.audit(ctx, a, out, err)
		h.refuseAuth(w, r, err)
		return
	}
	a.user = who
	// Read the body first, so that even a refused attempt is recorded
	// with what it asked for.
	bodyErr := readRelease(w, r, &a.req)
	switch {
	case h.cfg.readOnly:
		refuse(outReadOnly, http.StatusForbidden, "lockadmin: this admin page is read-only")
		return
	case h.cop.Check(r) != nil:
		refuse(outCSRF, http.StatusForbidden, "lockadmin: cross-origin request refused")
		return
	case r.Header.Get(csrfHeader) == "":
		refuse(outCSRF, http.StatusForbidden, "lockadmin: missing CSRF token (send the page's token in "+csrfHeader+")")
		return
	case !equal(r.Header.Get(csrfHeader), h.csrf):
		refuse(outCSRF, http.StatusForbidden, "lockadmin: wrong CSRF token (the page is out of date: reload it)")
		return
	case bodyErr != nil:
		refuse(outBadRequest, errorCode(bodyErr), bodyErr.Error())
		return
	case strings.TrimSpace(a.req.Reason) == "":
		refuse(outNoReason, http.StatusBadRequest, "lockadmin: a release needs a reason")
		return
	case !strings.HasPrefix(a.req.Name, h.cfg.prefix):
		refuse(outOutsidePrefix, http.StatusForbidden, fmt.Sprintf("lockadmin: %s is outside this page's prefix %s", driverkit.QuoteName(a.req.Name), driverkit.QuoteName(h.cfg.prefix)))
		return
	}

	// The release must finish, and be recorded as it ended, even if the
	// browser goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	hs, err := h.c.Holds(ctx, a.req.Name)
	if err != nil {
		code, msg := storeError(err, "list locks")
		h.audit(ctx, a, outFailed, err)
		writeError(w, code, msg)
		return
	}
	for _, hd := range hs {
		if hd.Name == a.req.Name {
			a.owner, a.token, a.looked = hd.Owner, hd.Token, true
		}
	}
	switch {
	case !a.looked:
		refuse(outNotHeld, http.StatusNotFound, fmt.Sprintf("lockadmin: %s is not held", driverkit.QuoteName(a.req.Name)))
		return
	case a.owner != a.req.Owner || a.token != a.req.Token:
		msg := fmt.Sprintf("lockadmin: %s changed hands since the page showed it; nothing was released", driverkit.QuoteName(a.req.Name))
		h.audit(ctx, a, outChanged, errors.New(msg))
		writeJSON(w, http.StatusConflict, changedAnswer{Error: msg, Owner: a.owner, Token: a.token})
		return
	}
	// Between the look and the release, the lock can still change hands:
	// ForceRelease takes no owner. The window is one store round trip.
	err = h.c.ForceRelease(ctx, a.req.Name)
	switch {
	case errors.Is(err, locker.ErrNotHeld):
		h.audit(ctx, a, outNotHeld, err)
		writeError(w, http.StatusNotFound, fmt.Sprintf("lockadmin: %s is not held", driverkit.QuoteName(a.req.Name)))
	case err != nil:
		code, msg := storeError(err, "release locks by force")
		h.audit(ctx, a, outFailed, err)
		writeError(w, code, msg)
	default:
		h.audit(ctx, a, outReleased, nil)
		writeJSON(w, http.StatusOK, releaseAnswer{Released: a.req.Name, Owner: a.owner, Token: a.token})
	}
}

// readRelease decodes the body of api/release into req.
func readRelease(w http.ResponseWriter, r *http.Request, req *releaseRequest) error {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &httpError{code: http.StatusUnsupportedMediaType, msg: "lockadmin: send the release as application/json"}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		*req = releaseRequest{}
		return &httpError{code: http.StatusBadRequest, msg: "lockadmin: bad release request: " + err.Error()}
	}
	switch {
	case req.Name == "":
		return &httpError{code: http.StatusBadRequest, msg: "lockadmin: a release needs a lock name"}
	case len(req.Reason) > maxReason:
		return &httpError{code: http.StatusBadRequest, msg: fmt.Sprintf("lockadmin: the reason is longer than %d bytes", maxReason)}
	case !utf8.ValidString(req.Reason) || !utf8.ValidString(req.Name):
		return &httpError{code: http.StatusBadRequest, msg: "lockadmin: the name and reason must be UTF-8"}
	}
	return nil
}
