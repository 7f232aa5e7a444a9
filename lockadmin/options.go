package lockadmin

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/golocker/locker"
)

// ErrInvalidOption is returned by New for an option it cannot accept.
var ErrInvalidOption = errors.New("lockadmin: invalid option")

// MinTokenLen is the shortest bearer token WithBearerToken accepts: long
// enough that guessing it over the network is hopeless.
const MinTokenLen = 16

// Option configures a Handler.
type Option func(*config) error

type config struct {
	prefix   string
	readOnly bool
	token    string
	user     string
	password string
	authn    func(*http.Request) (string, bool)
	audit    *slog.Logger
	rec      *Recorder
	backend  string
	secret   []byte
}

func (c *config) authenticated() bool {
	return c.token != "" || c.user != "" || c.authn != nil
}

// WithPrefix restricts the handler to the locks whose names start with p:
// it lists no other, and refuses to release any other.
func WithPrefix(p string) Option {
	return func(c *config) error {
		c.prefix = p
		return nil
	}
}

// WithReadOnly hides the release buttons and refuses every release with
// 403 Forbidden.
func WithReadOnly() Option {
	return func(c *config) error {
		c.readOnly = true
		return nil
	}
}

// WithBearerToken requires requests to carry "Authorization: Bearer token",
// or the cookie that the handler's login form sets after the token was
// typed in a browser. The token must be at least MinTokenLen bytes.
func WithBearerToken(token string) Option {
	return func(c *config) error {
		if len(token) < MinTokenLen {
			return fmt.Errorf("%w: bearer token shorter than %d bytes", ErrInvalidOption, MinTokenLen)
		}
		c.token = token
		return nil
	}
}

// WithBasicAuth requires HTTP basic authentication with user and password.
// The user name is what the audit log records as who asked.
func WithBasicAuth(user, password string) Option {
	return func(c *config) error {
		switch {
		case user == "" || password == "":
			return fmt.Errorf("%w: basic auth needs a user and a password", ErrInvalidOption)
		case strings.Contains(user, ":"):
			return fmt.Errorf("%w: basic auth user contains ':'", ErrInvalidOption)
		}
		c.user, c.password = user, password
		return nil
	}
}

// WithAuthenticator lets a service that authenticates its own users vouch
// for a request: f returns the user's name (for the audit log) and whether
// the request is allowed. It counts as authentication for Serve and for
// the loopback rule. A request that f refuses is answered 401 unless
// another configured method (bearer token, basic auth) accepts it.
func WithAuthenticator(f func(r *http.Request) (user string, ok bool)) Option {
	return func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: nil authenticator", ErrInvalidOption)
		}
		c.authn = f
		return nil
	}
}

// WithAuditLog sets the logger that records every force release and every
// refused attempt (default: none). docs/operating.md describes the records.
func WithAuditLog(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil audit logger", ErrInvalidOption)
		}
		c.audit = l
		return nil
	}
}

// WithRecorder has the page chart the statistics of r, which must also be
// the Client's observer (locker.WithObserver(r)).
func WithRecorder(r *Recorder) Option {
	return func(c *config) error {
		if r == nil {
			return fmt.Errorf("%w: nil recorder", ErrInvalidOption)
		}
		c.rec = r
		return nil
	}
}

// WithBackendURL shows the backend's URL on the page, with its password
// and secret parameters redacted (locker.Redact).
func WithBackendURL(u string) Option {
	return func(c *config) error {
		c.backend = locker.Redact(u)
		return nil
	}
}

// MinSecretLen is the shortest secret WithSecret accepts.
const MinSecretLen = 32

// WithSecret derives the handler's CSRF token and session-cookie key from
// secret instead of random bytes, so that the replicas of a service behind
// a load balancer accept each other's pages and logins. secret must be at
// least MinSecretLen bytes, random, and kept like a password.
func WithSecret(secret []byte) Option {
	return func(c *config) error {
		if len(secret) < MinSecretLen {
			return fmt.Errorf("%w: secret shorter than %d bytes", ErrInvalidOption, MinSecretLen)
		}
		c.secret = append([]byte(nil), secret...)
		return nil
	}
}
