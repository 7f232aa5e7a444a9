package etcdlock

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/golocker/locker/internal/driverkit"
)

// Defaults of the options.
const (
	// DefaultPrefix is the key prefix under which locks live unless the URL's
	// path or WithPrefix says otherwise.
	DefaultPrefix = "/golocker"
	// DefaultSessionTTL is the TTL of a Driver's session lease unless
	// WithSessionTTL says otherwise.
	DefaultSessionTTL = 10 * time.Second
	// DefaultDialTimeout bounds Open: its connection, login and first request.
	DefaultDialTimeout = 5 * time.Second
)

// cleanupTimeout bounds the deletion of a key whose acquisition failed or
// was given up (ctx ended), so that a cluster that is down cannot hang the
// caller. A key whose deletion fails is deleted later, in the background,
// or expires with the session.
const cleanupTimeout = 2 * time.Second

// Option configures a Driver (New, Open). An option that does not apply to
// the constructor it is given to is an error, not ignored.
type Option func(*options) error

type options struct {
	prefix      string
	sessionTTL  time.Duration
	dialTimeout time.Duration
	tlsConfig   *tls.Config
	driverkit.Common
}

// openOnly are the options that New refuses.
var openOnly = []string{"WithDialTimeout", "WithTLSConfig", "WithDialer"}

func defaultOptions() options {
	return options{prefix: DefaultPrefix, sessionTTL: DefaultSessionTTL, dialTimeout: DefaultDialTimeout}
}

func optionError(format string, args ...any) error {
	return driverkit.BadOption("etcdlock", format, args...)
}

// WithPrefix sets the key prefix under which the Driver keeps its locks
// (default DefaultPrefix). Lock name n lives under prefix/n/. Drivers that
// must see each other's locks need the same prefix. The prefix must start
// with '/', and must not end with '/' or contain an empty segment ("//").
// URL: the path, as in etcd://host:2379/locks.
func WithPrefix(prefix string) Option {
	return driverkit.Checked("etcdlock", prefix, cleanPrefix, func(o *options) *string { return &o.prefix })
}

// cleanPrefix validates a key prefix; "" and "/" mean DefaultPrefix.
func cleanPrefix(p string) (string, error) {
	if p == "" || p == "/" {
		return DefaultPrefix, nil
	}
	switch {
	case !strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("prefix %q does not start with '/'", p)
	case strings.HasSuffix(p, "/"):
		return "", fmt.Errorf("prefix %q ends with '/'", p)
	case strings.Contains(p, "//"):
		return "", fmt.Errorf("prefix %q has an empty segment", p)
	}
	return p, nil
}

// WithSessionTTL sets the TTL of the Driver's session lease (default
// DefaultSessionTTL): how long after its process dies, or loses the
// cluster, a Driver's locks are freed. etcd counts leases in whole seconds,
// so d must be a whole number of seconds, at least 1s; the cluster may
// raise a TTL below its minimum (1.5 × election timeout, rounded up), and
// the Driver then uses the cluster's value. URL parameter: session_ttl.
func WithSessionTTL(d time.Duration) Option {
	return func(o *options) error {
		if err := validSessionTTL(d); err != nil {
			return optionError("%v", err)
		}
		o.sessionTTL = d
		return nil
	}
}

func validSessionTTL(d time.Duration) error {
	if d < time.Second || d%time.Second != 0 {
		return fmt.Errorf("session TTL %v: must be a whole number of seconds, at least 1s", d)
	}
	return nil
}

// WithDialTimeout bounds Open's connection to the cluster, and its first
// request (default DefaultDialTimeout; less when Open's ctx ends sooner).
// URL parameter: dial_timeout. Only for Open: configure the client you
// give New yourself.
func WithDialTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return optionError("dial timeout %v, must be positive", d)
		}
		o.dialTimeout = d
		o.Set("WithDialTimeout")
		return nil
	}
}

// WithTLSConfig makes Open connect with TLS using cfg, which replaces any
// tls_ parameter of the URL. Only for Open.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(o *options) error {
		if cfg == nil {
			return optionError("nil TLS config")
		}
		o.tlsConfig = cfg
		o.Set("WithTLSConfig")
		return nil
	}
}

// WithDialer makes the client that Open creates connect through dial (a
// proxy, or a test's conformance.FaultNet), with network "tcp". Only for
// Open: give the client you pass New a grpc.WithContextDialer yourself.
func WithDialer(dial func(ctx context.Context, network, address string) (net.Conn, error)) Option {
	return driverkit.WithDialer[options]("etcdlock", dial)
}
