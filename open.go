package locker

import (
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/golocker/locker/backend"
)

// Opener opens a driver from a URL whose scheme it registered. The URL is
// parsed; its query holds driver options, and an opener rejects options it
// does not know (a typo must not be silently ignored).
type Opener func(ctx context.Context, u *url.URL) (backend.Driver, error)

// The driver registry is the one piece of global state: filled by drivers'
// init functions, read by Open.
var registry struct {
	mu      sync.RWMutex
	openers map[string]Opener
}

// Register makes a driver available to Open under scheme. Drivers call it
// from init. It panics if open is nil or the scheme is registered twice:
// both are programming errors.
func Register(scheme string, open Opener) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if open == nil {
		panic("locker: Register opener is nil")
	}
	if !validScheme(scheme) {
		panic("locker: Register scheme must be a lower-case URL scheme ([a-z][a-z0-9+.-]*): " + strconv.Quote(scheme))
	}
	if _, dup := registry.openers[scheme]; dup {
		panic("locker: Register called twice for scheme " + strconv.Quote(scheme))
	}
	if registry.openers == nil {
		registry.openers = make(map[string]Opener)
	}
	registry.openers[scheme] = open
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	s := make([]string, 0, len(registry.openers))
	for k := range registry.openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open returns a Client on the driver registered for rawURL's scheme. The
// driver's package must be imported, usually for its side effect:
//
//	import _ "github.com/golocker/locker/redislock"
//
// Credentials in rawURL never appear in the error.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Client, error) {
	if ctx == nil {
		return nil, wrap("open", ErrNilContext)
	}
	if !strings.Contains(rawURL, "://") {
		if host, port, err := net.SplitHostPort(rawURL); err == nil && host != "" && port != "" {
			// "127.0.0.1:6379" would not parse, or parse as scheme "localhost".
			return nil, wrap("open "+Redact(rawURL), errorf(ErrBadURL, "no scheme (want e.g. redis://%s)", rawURL))
		}
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the URL, and its inner error can repeat part
		// of a password that has an unescaped / ? or # (": invalid port
		// \":s3cret\" after host"): give the detail only without userinfo.
		detail := "malformed (percent-encode reserved characters such as @ : / ? # in the user name and password)"
		var ue *url.Error
		if errors.As(err, &ue) && !strings.Contains(rawURL, "@") {
			detail = ue.Err.Error()
		}
		return nil, wrap("open "+Redact(rawURL), errorf(ErrBadURL, "%s", detail))
	}
	if u.Scheme == "" {
		return nil, wrap("open "+Redact(rawURL), errorf(ErrBadURL, "no scheme (want e.g. redis://127.0.0.1:6379 or mem://)"))
	}
	scheme := strings.ToLower(u.Scheme)
	registry.mu.RLock()
	open := registry.openers[scheme]
	registry.mu.RUnlock()
	if open == nil {
		return nil, &unknownSchemeError{scheme: scheme}
	}
	single, err := takeSingleProcess(u)
	if err != nil {
		return nil, wrap("open "+Redact(rawURL), err)
	}
	var cfg config
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	d, err := open(ctx, u)
	if err != nil {
		return nil, wrap("open "+Redact(rawURL), scrub(err, u))
	}
	if !d.Capabilities().CrossProcess && (cfg.crossProcess || !single && !inTest()) {
		_ = d.Close()
		return nil, wrap("open "+Redact(rawURL), inProcessError(cfg.crossProcess))
	}
	c, err := New(d, opts...)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return c, nil
}

// inTest reports whether the program is a test binary, where the in-process
// driver is allowed without a word.
var inTest = testing.Testing

// singleProcessParam is the URL parameter that lets Open use an in-process
// driver outside tests.
const singleProcessParam = "single_process"

// takeSingleProcess removes single_process from u's query and reports its
// value: drivers never see it.
func takeSingleProcess(u *url.URL) (bool, error) {
	q := u.Query()
	vs, ok := q[singleProcessParam]
	if !ok {
		return false, nil
	}
	v, err := strconv.ParseBool(vs[0])
	if len(vs) != 1 || err != nil {
		return false, errorf(ErrBadURL, "%s=%q: want true or false, once", singleProcessParam, strings.Join(vs, ","))
	}
	q.Del(singleProcessParam)
	u.RawQuery = q.Encode()
	return v, nil
}

func inProcessError(required bool) error {
	if required {
		return errorf(ErrBadURL, "an in-process driver cannot exclude other processes (RequireCrossProcess); use a store every process reaches: redis://, postgres://, etcd://, ...")
	}
	return errorf(ErrBadURL, "an in-process driver does not exclude other processes: replicas configured with it would all hold the same lock at once. Outside tests, add ?%s=true to the URL for a program that runs as one process, or use a store every process reaches: redis://, postgres://, etcd://, ...", singleProcessParam)
}

type unknownSchemeError struct{ scheme string }

func (e *unknownSchemeError) Error() string {
	return "locker: unknown scheme " + strconv.Quote(e.scheme) + " (forgotten import? registered: " + strings.Join(Schemes(), ", ") + ")"
}

func (e *unknownSchemeError) Unwrap() error { return ErrUnknownScheme }

// validScheme reports whether s is a lower-case URL scheme (RFC 3986).
func validScheme(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
