package etcdlock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/urlparams"
)

// Scheme is the URL scheme this package registers with package locker:
//
//	etcd://[user:password@]host1:2379[,host2:2379...][/prefix][?param=value&...]
const Scheme = "etcd"

// DefaultPort is the client port of a host given without one.
const DefaultPort = "2379"

func init() {
	locker.Register(Scheme, func(ctx context.Context, u *url.URL) (backend.Driver, error) {
		return openURL(ctx, u, nil)
	})
}

// Open returns the Driver of an etcd:// URL, as locker.Open would use it.
// It creates the etcd client, which Close closes, and checks that the
// cluster answers. opts apply after the URL's parameters. The password never
// appears in an error.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Driver, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the URL, password included
		}
		return nil, fmt.Errorf("etcdlock: open %s: %w: %v", locker.Redact(rawURL), backend.ErrBadURL, err)
	}
	d, err := openURL(ctx, u, opts)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: open %s: %w", locker.Redact(rawURL), err)
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
	tc := o.tlsConfig
	if tc == nil && cfg.tls != nil {
		if tc, err = cfg.tls.config(); err != nil {
			return nil, err
		}
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.endpoints,
		DialTimeout: o.dialTimeout,
		Username:    cfg.username,
		Password:    cfg.password,
		TLS:         tc,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdlock: %s: %w", strings.Join(cfg.endpoints, ","), err)
	}
	// The client connects lazily: granting the session proves that the
	// cluster answers and the credentials work before the Driver is
	// handed out, and starts its keepalive now rather than under a first
	// Acquire.
	d := newDriver(cli, true, o)
	gctx, cancel := context.WithTimeout(ctx, o.dialTimeout)
	defer cancel()
	if _, err := d.session(gctx); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("etcdlock: %s: %w", strings.Join(cfg.endpoints, ","), err)
	}
	return d, nil
}

// urlConfig is what a URL says.
type urlConfig struct {
	endpoints          []string
	username, password string
	tls                *tlsParams
	opts               []Option
}

type tlsParams struct {
	serverName         string
	insecureSkipVerify bool
	caFile             string
	certFile, keyFile  string
}

// params are the query parameters a URL may have.
var params = []string{
	"session_ttl", "dial_timeout",
	"tls", "tls_ca_file", "tls_cert_file", "tls_key_file", "tls_server_name", "tls_insecure_skip_verify",
}

func badURL(format string, args ...any) error {
	return &urlError{msg: fmt.Sprintf(format, args...)}
}

// urlError is a URL that cannot be used. It wraps backend.ErrBadURL, and
// says so without repeating the "locker: " that locker.Open puts first.
type urlError struct{ msg string }

func (e *urlError) Error() string { return "etcdlock: bad URL: " + e.msg }

func (e *urlError) Unwrap() error { return backend.ErrBadURL }

// parseURL reads an etcd:// URL. Its errors wrap backend.ErrBadURL and never
// contain the password.
func parseURL(u *url.URL) (*urlConfig, error) {
	if !strings.EqualFold(u.Scheme, Scheme) {
		return nil, badURL("scheme %q, want etcd://", u.Scheme)
	}
	if u.Opaque != "" {
		return nil, badURL("want etcd://host:2379[/prefix]")
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return nil, badURL("etcd:// takes no fragment")
	}
	cfg := &urlConfig{}
	if u.User != nil {
		cfg.username = u.User.Username()
		cfg.password, _ = u.User.Password()
		if cfg.username == "" {
			return nil, badURL("a password without a user name")
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
		return badURL("no host (want etcd://host:2379)")
	}
	addrs, err := urlparams.Hosts(hostList, DefaultPort)
	if err != nil {
		return badURL("%v", err)
	}
	cfg.endpoints = addrs
	return nil
}

func (cfg *urlConfig) parseQuery(raw string) error {
	q, keys, err := urlparams.Query(raw, params)
	if err != nil {
		return badURL("%v", err)
	}
	tlsOn, tlsSet := false, false
	for _, k := range keys {
		v := q.Get(k)
		var err error
		switch k {
		case "session_ttl":
			var d time.Duration
			if d, err = time.ParseDuration(v); err == nil {
				err = validSessionTTL(d)
			}
			cfg.opts = append(cfg.opts, WithSessionTTL(d))
		case "dial_timeout":
			var d time.Duration
			if d, err = time.ParseDuration(v); err == nil && d <= 0 {
				err = errors.New("must be positive")
			}
			cfg.opts = append(cfg.opts, WithDialTimeout(d))
		case "tls":
			tlsOn, err = strconv.ParseBool(v)
			tlsSet = true
		case "tls_server_name":
			cfg.tlsParams().serverName = v
		case "tls_insecure_skip_verify":
			cfg.tlsParams().insecureSkipVerify, err = strconv.ParseBool(v)
		case "tls_ca_file":
			cfg.tlsParams().caFile = v
		case "tls_cert_file":
			cfg.tlsParams().certFile = v
		case "tls_key_file":
			cfg.tlsParams().keyFile = v
		}
		if err != nil {
			return badURL("bad %s %q: %v", k, v, err)
		}
	}
	switch {
	case tlsSet && !tlsOn && cfg.tls != nil:
		return badURL("tls=false with tls_ parameters")
	case tlsOn:
		cfg.tlsParams()
	}
	if t := cfg.tls; t != nil && (t.certFile == "") != (t.keyFile == "") {
		return badURL("tls_cert_file and tls_key_file go together")
	}
	return nil
}

func (cfg *urlConfig) tlsParams() *tlsParams {
	if cfg.tls == nil {
		cfg.tls = &tlsParams{}
	}
	return cfg.tls
}

// config builds the TLS configuration, reading the files named.
func (t *tlsParams) config() (*tls.Config, error) {
	c := &tls.Config{
		ServerName:         t.serverName,
		InsecureSkipVerify: t.insecureSkipVerify, //nolint:gosec // asked for explicitly
		MinVersion:         tls.VersionTLS12,
	}
	if t.caFile != "" {
		pem, err := os.ReadFile(t.caFile)
		if err != nil {
			return nil, fmt.Errorf("etcdlock: tls_ca_file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcdlock: tls_ca_file %s: no PEM certificate", t.caFile)
		}
	}
	if t.certFile != "" {
		cert, err := tls.LoadX509KeyPair(t.certFile, t.keyFile)
		if err != nil {
			return nil, fmt.Errorf("etcdlock: tls_cert_file, tls_key_file: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
