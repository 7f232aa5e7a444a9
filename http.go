package locker

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// HTTPOption configures Middleware.
type HTTPOption func(*httpConfig)

type httpConfig struct {
	do         []DoOption
	opts       []Option
	onError    func(w http.ResponseWriter, r *http.Request, err error)
	retryAfter time.Duration
}

// HTTPDoOptions sets how the middleware waits for a busy lock (OnBusy,
// WaitAtMost). By default a request waits until the lock is free or the
// request's context ends.
func HTTPDoOptions(opts ...DoOption) HTTPOption {
	return func(c *httpConfig) { c.do = append(c.do, opts...) }
}

// HTTPMutexOptions sets the options of the handles the middleware creates
// (WithTTL, ...).
func HTTPMutexOptions(opts ...Option) HTTPOption {
	return func(c *httpConfig) { c.opts = append(c.opts, opts...) }
}

// HTTPErrorHandler replaces the middleware's error responses.
func HTTPErrorHandler(f func(w http.ResponseWriter, r *http.Request, err error)) HTTPOption {
	return func(c *httpConfig) { c.onError = f }
}

// Middleware serialises requests that share a key: each request runs while
// holding the lock named by key(r), as Do runs fn. Requests with different
// keys run in parallel. The handler's request context is cancelled if the
// hold is lost.
//
// Responses when the handler does not run: 400 when key returns an error
// (its message is not sent: it may hold request data), 423 Locked with
// Retry-After when the lock is busy under FailFast or WaitAtMost, 503 when
// the store fails. Under OnBusy(Skip) a busy request gets 204 No Content.
//
//	byAccount := func(r *http.Request) (string, error) {
//		id := r.PathValue("account")
//		if id == "" {
//			return "", errors.New("no account")
//		}
//		return "account/" + id, nil
//	}
//	mux.Handle("POST /accounts/{account}/transfer", locker.Middleware(c, byAccount)(transfer))
func Middleware(c *Client, key func(*http.Request) (string, error), opts ...HTTPOption) func(http.Handler) http.Handler {
	cfg := httpConfig{onError: defaultHTTPError, retryAfter: time.Second}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			name, err := key(r)
			if err != nil {
				cfg.onError(w, r, &keyError{err: err})
				return
			}
			m := c.NewMutex(name, cfg.opts...)
			ran := false
			err = Do(r.Context(), m, func(ctx context.Context) error {
				ran = true
				next.ServeHTTP(w, r.WithContext(ctx))
				return nil
			}, cfg.do...)
			switch {
			case ran:
				// The handler has answered; a loss or unlock failure
				// after it can only be logged.
				if err != nil {
					c.cfg.logger.Warn("locker: middleware", "name", name, "err", err)
				}
			case err == nil:
				w.WriteHeader(http.StatusNoContent) // skipped under OnBusy(Skip)
			default:
				if errors.Is(err, ErrBusy) {
					w.Header().Set("Retry-After", strconv.Itoa(int(cfg.retryAfter/time.Second)))
				}
				cfg.onError(w, r, err)
			}
		})
	}
}

type keyError struct{ err error }

func (e *keyError) Error() string { return "locker: lock key: " + e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

func defaultHTTPError(w http.ResponseWriter, _ *http.Request, err error) {
	var ke *keyError
	switch {
	case errors.As(err, &ke):
		http.Error(w, "bad request: no lock key", http.StatusBadRequest)
	case errors.Is(err, ErrBusy):
		http.Error(w, "locked: try again later", http.StatusLocked)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client went away or gave up; nobody reads this.
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		http.Error(w, "lock unavailable", http.StatusServiceUnavailable)
	}
}
