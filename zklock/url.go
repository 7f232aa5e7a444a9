package zklock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/urlparams"
)

// Scheme is the URL scheme this package registers with package locker:
//
//	zk://[user:password@]host1:2181[,host2:2181...][/prefix][?param=value&...]
const Scheme = "zk"

// DefaultPort is the client port of a host given without one.
const DefaultPort = "2181"

func init() {
	locker.Register(Scheme, func(ctx context.Context, u *url.URL) (backend.Driver, error) {
		return openURL(ctx, u, nil)
	})
}

// Open returns the Driver of a zk:// URL, as locker.Open would use it. It
// connects to the ensemble (the connection is the Driver's: Close closes
// it, which ends the session), authenticates with the URL's digest
// credentials if any, and checks that the ensemble answers. opts apply
// after the URL's parameters. The password never appears in an error.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Driver, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the URL, password included
		}
		return nil, fmt.Errorf("zklock: open %s: %w: %v", locker.Redact(rawURL), backend.ErrBadURL, err)
	}
	d, err := openURL(ctx, u, opts)
	if err != nil {
		return nil, fmt.Errorf("zklock: open %s: %w", locker.Redact(rawURL), err)
	}
	return d, nil
}

func openURL(ctx context.Context, u *url.URL, extra []Option) (*Driver, error) {
	cfg, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	o := defaultOptions()
	if err := o.apply(append(cfg.opts, extra...)); err != nil {
		return nil, err
	}
	if o.acl == nil {
		o.acl = zk.WorldACL(zk.PermAll)
		if cfg.username != "" {
			o.acl = zk.AuthACL(zk.PermAll)
		}
	}
	log := &clientLog{}
	dial := o.dialer
	if dial == nil {
		dial = net.DialTimeout
	}
	conn, _, err := zk.Connect(cfg.servers, o.sessionTimeout, zk.WithLogger(log), zk.WithDialer(dial))
	if err != nil {
		return nil, fmt.Errorf("zklock: %s: %w", strings.Join(cfg.servers, ","), err)
	}
	d := newDriver(conn, true, o, &log.negotiated)
	cctx, cancel := context.WithTimeout(ctx, o.connectTimeout)
	defer cancel()
	if cfg.username != "" {
		auth := []byte(cfg.username + ":" + cfg.password)
		if err := d.call(cctx, func() error { return conn.AddAuth("digest", auth) }); err != nil {
			_ = d.Close()
			return nil, fmt.Errorf("zklock: %s: authenticate: %w", strings.Join(cfg.servers, ","), ctxErr(cctx, err))
		}
	}
	// One answered request proves the ensemble answers, and confirms the
	// session before the Driver is handed out.
	if _, err := d.generation(cctx); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("zklock: %s: %w", strings.Join(cfg.servers, ","), err)
	}
	return d, nil
}

// clientLog receives go-zookeeper's log lines. It keeps quiet, and records
// the session timeout the server granted, which go-zookeeper does not
// expose otherwise.
type clientLog struct{ negotiated atomic.Int64 }

func (l *clientLog) Printf(format string, args ...any) {
	if format == "authenticated: id=%d, timeout=%d" && len(args) == 2 {
		if ms, ok := args[1].(int32); ok && ms > 0 {
			l.negotiated.Store(int64(ms))
		}
	}
}

// urlConfig is what a URL says.
type urlConfig struct {
	servers            []string
	username, password string
	opts               []Option
}

// params are the query parameters a URL may have.
var params = []string{"session_timeout", "connect_timeout"}

func badURL(format string, args ...any) error {
	return &urlError{msg: fmt.Sprintf(format, args...)}
}

// urlError is a URL that cannot be used. It wraps backend.ErrBadURL, and
// says so without repeating the "locker: " that locker.Open puts first.
type urlError struct{ msg string }

func (e *urlError) Error() string { return "zklock: bad URL: " + e.msg }

func (e *urlError) Unwrap() error { return backend.ErrBadURL }

// parseURL reads a zk:// URL. Its errors wrap backend.ErrBadURL and never
// contain the password.
func parseURL(u *url.URL) (*urlConfig, error) {
	if !strings.EqualFold(u.Scheme, Scheme) {
		return nil, badURL("scheme %q, want zk://", u.Scheme)
	}
	if u.Opaque != "" {
		return nil, badURL("want zk://host:2181[/prefix]")
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return nil, badURL("zk:// takes no fragment")
	}
	cfg := &urlConfig{}
	if u.User != nil {
		cfg.username = u.User.Username()
		cfg.password, _ = u.User.Password()
		if cfg.username == "" {
			return nil, badURL("a password without a user name")
		}
		if strings.Contains(cfg.username, ":") {
			return nil, badURL("a digest user name cannot contain ':'")
		}
	}
	if err := cfg.parseHosts(u.Host); err != nil {
		return nil, err
	}
	if u.Path != "" && u.Path != "/" {
		p := strings.TrimSuffix(u.Path, "/")
		if _, err := cleanPrefix(p); err != nil {
			return nil, badURL("%v", err)
		}
		cfg.opts = append(cfg.opts, WithPrefix(p))
	}
	if err := cfg.parseQuery(u.RawQuery); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (cfg *urlConfig) parseHosts(hostList string) error {
	if hostList == "" {
		return badURL("no host (want zk://host:2181)")
	}
	addrs, err := urlparams.Hosts(hostList, DefaultPort)
	if err != nil {
		return badURL("%v", err)
	}
	cfg.servers = addrs
	return nil
}

func (cfg *urlConfig) parseQuery(raw string) error {
	q, keys, err := urlparams.Query(raw, params)
	if err != nil {
		return badURL("%v", err)
	}
	for _, k := range keys {
		v := q.Get(k)
		d, err := time.ParseDuration(v)
		switch k {
		case "session_timeout":
			if err == nil && d < 10*time.Millisecond {
				err = errors.New("must be at least 10ms")
			}
			cfg.opts = append(cfg.opts, WithSessionTimeout(d))
		case "connect_timeout":
			if err == nil && d <= 0 {
				err = errors.New("must be positive")
			}
			cfg.opts = append(cfg.opts, WithConnectTimeout(d))
		}
		if err != nil {
			return badURL("bad %s %q: %v", k, v, err)
		}
	}
	return nil
}
