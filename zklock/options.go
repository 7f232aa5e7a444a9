package zklock

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/golocker/locker/internal/driverkit"
)

// Defaults of the options.
const (
	// DefaultPrefix is the node under which locks live unless the URL's
	// path or WithPrefix says otherwise.
	DefaultPrefix = "/golocker"
	// DefaultSessionTimeout is the session timeout Open asks for unless
	// WithSessionTimeout says otherwise.
	DefaultSessionTimeout = 10 * time.Second
	// DefaultConnectTimeout bounds Open: its connection and first exchange.
	DefaultConnectTimeout = 5 * time.Second
)

// cleanupTimeout bounds the deletion of a node whose acquisition failed or
// was given up (ctx ended), so that an ensemble that does not answer cannot
// hang the caller. A node whose deletion fails is deleted later, in the
// background, or goes with its session.
const cleanupTimeout = 2 * time.Second

// Option configures a Driver (New, Open). An option that does not apply to
// the constructor it is given to is an error, not ignored.
type Option func(*options) error

type options struct {
	prefix         string
	sessionTimeout time.Duration
	timeoutSet     bool
	connectTimeout time.Duration
	acl            []zk.ACL
	driverkit.Common
}

// openOnly are the options that New refuses.
var openOnly = []string{"WithConnectTimeout", "WithDialer"}

func defaultOptions() options {
	return options{prefix: DefaultPrefix, sessionTimeout: DefaultSessionTimeout, connectTimeout: DefaultConnectTimeout}
}

func optionError(format string, args ...any) error {
	return driverkit.BadOption("zklock", format, args...)
}

// WithPrefix sets the node under which the Driver keeps its locks (default
// DefaultPrefix): lock name n is the node prefix/n, whose children are its
// holder and waiters. Drivers that must see each other's locks need the
// same prefix. It must be a ZooKeeper path other than "/", outside
// /zookeeper, without a trailing '/'. URL: the path, as in
// zk://host:2181/locks.
func WithPrefix(prefix string) Option {
	return driverkit.Checked("zklock", prefix, cleanPrefix, func(o *options) *string { return &o.prefix })
}

// cleanPrefix validates a prefix; "" and "/" mean DefaultPrefix.
func cleanPrefix(p string) (string, error) {
	if p == "" || p == "/" {
		return DefaultPrefix, nil
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return "", fmt.Errorf("prefix %q must begin with '/' and not end with it", p)
	}
	if p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return "", fmt.Errorf("prefix %q is ZooKeeper's own", p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("prefix %q has an empty, . or .. segment", p)
		}
		for _, r := range seg {
			if forbidden(r) {
				return "", fmt.Errorf("prefix %q has a character ZooKeeper does not allow (%U)", p, r)
			}
		}
	}
	return p, nil
}

// WithSessionTimeout sets the ZooKeeper session timeout. For Open it is
// the timeout asked for (default DefaultSessionTimeout; the server keeps it
// between 2 and 20 ticks, and the Driver uses what the server granted;
// Open refuses a timeout the server raised to its minimum). For
// New it is required: the timeout of the connection given, which the Driver
// cannot read from it. A session whose server stays out of reach for this
// long expires, and with it every lock of the Driver. URL parameter:
// session_timeout.
func WithSessionTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 10*time.Millisecond {
			return optionError("session timeout %v, must be at least 10ms", d)
		}
		o.sessionTimeout, o.timeoutSet = d, true
		return nil
	}
}

// WithConnectTimeout bounds Open's first exchange with the ensemble
// (default DefaultConnectTimeout). URL parameter: connect_timeout. Only for
// Open.
func WithConnectTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return optionError("connect timeout %v, must be positive", d)
		}
		o.connectTimeout = d
		o.Set("WithConnectTimeout")
		return nil
	}
}

// WithACL sets the ACL of the nodes the Driver creates. The default is
// world:anyone with every permission, or, when the URL has digest
// credentials, every permission for the authenticated creator
// (zk.AuthACL(zk.PermAll)) — every Driver sharing the locks must then use
// the same credentials.
func WithACL(acl []zk.ACL) Option {
	return func(o *options) error {
		if len(acl) == 0 {
			return optionError("empty ACL")
		}
		o.acl = acl
		return nil
	}
}

// WithDialer makes the connection that Open creates dial through dial (a
// proxy, or a test's conformance.FaultNet), within go-zookeeper's connect
// timeout. Only for Open: give the connection you pass New a zk.WithDialer
// yourself.
func WithDialer(dial func(ctx context.Context, network, address string) (net.Conn, error)) Option {
	return driverkit.WithDialer[options]("zklock", dial)
}
