package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/driverkit"
)

// Scheme is the URL scheme this package registers with package locker:
//
//	etcd://[user:password@]host1:2379[,host2:2379...][/prefix][?param=value&...]
const Scheme = "etcd"

// DefaultPort is the client port of a host given without one.
const DefaultPort = "2379"

// opener opens the URLs of Scheme.
var opener = driverkit.Opener[*urlConfig, options, Option, *Driver]{Pkg: "etcdlock", Parse: parseURL, Defaults: defaultOptions, Open: open}

func init() { locker.Register(Scheme, opener.ForLocker) }

// Open returns the Driver of an etcd:// URL, as locker.Open would use it.
// It creates the etcd client, which Close closes, and checks that the
// cluster answers. opts apply after the URL's parameters. It returns within
// the dial timeout, or when ctx ends if sooner, and its error names the
// cause (connection refused, unknown host, TLS that the server does not
// speak or expects, authentication failed). The password never appears in
// an error.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Driver, error) {
	return opener.OpenRaw(ctx, rawURL, opts)
}

// open makes the Driver of a URL's cfg, with options o.
func open(ctx context.Context, cfg *urlConfig, o options) (*Driver, error) {
	tc := o.tlsConfig
	if tc == nil && cfg.tls != nil {
		var err error
		if tc, err = cfg.tls.Config(); err != nil {
			return nil, fmt.Errorf("etcdlock: %w", err)
		}
	}
	// The dial timeout bounds Open, or ctx when it ends sooner.
	ctx, cancel := context.WithTimeout(ctx, o.dialTimeout)
	defer cancel()
	eps := strings.Join(cfg.endpoints, ",")
	dialTimeout := o.dialTimeout
	if dl, ok := ctx.Deadline(); ok {
		dialTimeout = max(min(dialTimeout, time.Until(dl)), time.Millisecond)
	}
	ccfg := clientv3.Config{
		Endpoints:   cfg.endpoints,
		DialTimeout: dialTimeout,
		Username:    cfg.username,
		Password:    cfg.password,
		TLS:         tc,
	}
	if o.Dialer != nil {
		dial := o.Dialer
		ccfg.DialOptions = []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dial(ctx, "tcp", addr)
		})}
	}
	log := new(atomic.Pointer[slog.Logger])
	ccfg.Logger = zap.New(&slogCore{log: log})
	// grpc retries its connections silently until ctx ends: probes of
	// the endpoints tell why none can be reached, at once when waiting
	// cannot help.
	d, err := driverkit.Reach(ctx, o.Dialer, cfg.endpoints, tc, tc == nil, func(ctx context.Context) (*Driver, error) {
		cli, err := newClient(ctx, ccfg)
		if err != nil {
			return nil, fmt.Errorf("etcdlock: %s: %w", eps, err)
		}
		// The client connects lazily: granting the session proves that
		// the cluster answers and the credentials work before the Driver
		// is handed out, and starts its keepalive now rather than under a
		// first Acquire.
		d := newDriver(cli, true, o, log)
		if _, err := d.session(ctx); err != nil {
			_ = d.Close()
			return nil, err
		}
		return d, nil
	})
	if err != nil {
		return nil, driverkit.ConnectError(err, tc != nil, authCause)
	}
	return d, nil
}

// authCause tells etcd's refusal of the credentials.
func authCause(err error) string {
	if errors.Is(err, rpctypes.ErrAuthFailed) || errors.Is(err, rpctypes.ErrGRPCAuthFailed) || errors.Is(err, rpctypes.ErrGRPCInvalidAuthToken) {
		return driverkit.CauseAuth
	}
	return ""
}

// newClient creates the etcd client of cfg, returning when ctx ends even
// if clientv3 does not (it logs in with the cluster, within DialTimeout);
// a client made too late is closed.
func newClient(ctx context.Context, cfg clientv3.Config) (*clientv3.Client, error) {
	return driverkit.Within(ctx, func() (*clientv3.Client, error) { return clientv3.New(cfg) }, func(cli *clientv3.Client) { _ = cli.Close() })
}

// urlConfig is what a URL says.
type urlConfig struct {
	endpoints          []string
	username, password string
	tls                *driverkit.TLSParams
	opts               []Option
}

// URLOptions returns the options the URL's parameters set.
func (cfg *urlConfig) URLOptions() []Option { return cfg.opts }

// params are the query parameters a URL may have.
var params = append([]string{"session_ttl", "dial_timeout", "tls"}, driverkit.TLSParamNames...)

func badURL(format string, args ...any) error {
	return driverkit.BadURL("etcdlock", format, args...)
}

// parseURL reads an etcd:// URL. Its errors wrap backend.ErrBadURL and never
// contain the password.
func parseURL(u *url.URL) (*urlConfig, error) {
	h, err := driverkit.ParseHostsURL("etcdlock", Scheme, DefaultPort, u)
	if err != nil {
		return nil, err
	}
	cfg := &urlConfig{endpoints: h.Hosts, username: h.Username, password: h.Password}
	if h.Path != "" {
		if _, err := cleanPrefix(h.Path); err != nil {
			return nil, badURL("%v", err)
		}
		cfg.opts = append(cfg.opts, WithPrefix(h.Path))
	}
	if err := cfg.parseQuery(u.RawQuery); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (cfg *urlConfig) parseQuery(raw string) error {
	q, keys, err := driverkit.Query(raw, params)
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
			cfg.tlsParams().ServerName = v
		case "tls_insecure_skip_verify":
			cfg.tlsParams().InsecureSkipVerify, err = strconv.ParseBool(v)
		case "tls_ca_file":
			cfg.tlsParams().CAFile = v
		case "tls_cert_file":
			cfg.tlsParams().CertFile = v
		case "tls_key_file":
			cfg.tlsParams().KeyFile = v
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
	if t := cfg.tls; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		return badURL("tls_cert_file and tls_key_file go together")
	}
	return nil
}

func (cfg *urlConfig) tlsParams() *driverkit.TLSParams {
	if cfg.tls == nil {
		cfg.tls = &driverkit.TLSParams{}
	}
	return cfg.tls
}
