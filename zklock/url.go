package zklock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/driverkit"
)

// Scheme is the URL scheme this package registers with package locker:
//
//	zk://[user:password@]host1:2181[,host2:2181...][/prefix][?param=value&...]
const Scheme = "zk"

// DefaultPort is the client port of a host given without one.
const DefaultPort = "2181"

// opener opens the URLs of Scheme.
var opener = driverkit.Opener[*urlConfig, options, Option, *Driver]{Pkg: "zklock", Parse: parseURL, Defaults: defaultOptions, Open: open}

func init() { locker.Register(Scheme, opener.ForLocker) }

// Open returns the Driver of a zk:// URL, as locker.Open would use it. It
// connects to the ensemble (the connection is the Driver's: Close closes
// it, which ends the session), authenticates with the URL's digest
// credentials if any, and checks that the ensemble answers. opts apply
// after the URL's parameters. It returns within the connect timeout, or
// when ctx ends if sooner, and its error names the cause (connection
// refused, unknown host, a TLS server, no answer). The password never
// appears in an error.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Driver, error) {
	return opener.OpenRaw(ctx, rawURL, opts)
}

// open makes the Driver of a URL's cfg, with options o.
func open(ctx context.Context, cfg *urlConfig, o options) (*Driver, error) {
	if o.acl == nil {
		o.acl = zk.WorldACL(zk.PermAll)
		if cfg.username != "" {
			o.acl = zk.AuthACL(zk.PermAll)
		}
	}
	log := &clientLog{}
	servers := strings.Join(cfg.servers, ",")
	dial := net.DialTimeout
	if o.Dialer != nil {
		dial = func(network, addr string, timeout time.Duration) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			return o.Dialer(ctx, network, addr)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, o.connectTimeout)
	defer cancel()
	// go-zookeeper retries its connections silently until cctx ends:
	// probes of the servers tell why none can be reached, at once when
	// waiting cannot help.
	d, err := driverkit.Reach(cctx, o.Dialer, cfg.servers, nil, true, func(cctx context.Context) (*Driver, error) {
		conn, _, err := zk.Connect(cfg.servers, o.sessionTimeout, zk.WithLogger(log), zk.WithDialer(dial))
		if err != nil {
			return nil, fmt.Errorf("zklock: %s: %w", servers, err)
		}
		d := newDriver(conn, true, o, log, servers)
		if cfg.username != "" {
			auth := []byte(cfg.username + ":" + cfg.password)
			if err := d.call(cctx, func() error { return conn.AddAuth("digest", auth) }); err != nil {
				_ = d.Close()
				return nil, d.storeErr(cctx, fmt.Errorf("authenticate: %w", err))
			}
		}
		// One answered request proves the ensemble answers, and confirms
		// the session before the Driver is handed out.
		if _, err := d.generation(cctx); err != nil {
			if cctx.Err() != nil {
				// go-zookeeper's Close waits up to a second for the
				// answer to its close request, which a server that did
				// not answer before will not send: Open does not wait.
				go func() { _ = d.Close() }()
			} else {
				_ = d.Close()
			}
			return nil, d.storeErr(cctx, err)
		}
		return d, nil
	})
	if err != nil {
		return nil, driverkit.ConnectError(err, false, nil)
	}
	if err := checkGranted(o, log.negotiated.Load()); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

// minSessionTimeout is the shortest session_timeout a URL may ask for. A
// server grants at least its minSessionTimeout, by default two ticks, and
// checks sessions once a tick; nobody runs ZooKeeper with a tick shorter
// than 100 ms (2000 ms is the sample configuration's, 3000 ms the
// server's default), so a shorter timeout is a mistake, which Open would
// otherwise find only when the ensemble raised it.
const minSessionTimeout = 200 * time.Millisecond

// checkGranted compares the session timeout the ensemble granted (ms, 0
// when unknown) with the one asked for. The server raises a timeout below
// its minimum (2 ticks by default) and lowers one above its maximum (20
// ticks). A raise means that an explicit ask could not be met: holds of a
// crashed owner would live longer than the user configured, so Open
// refuses it, naming the least the ensemble grants. A lower timeout is
// safe (the Driver goes by what was granted: see sessionTimeout), and is
// what the default becomes on an ensemble with short ticks.
func checkGranted(o options, grantedMS int64) error {
	granted := time.Duration(grantedMS) * time.Millisecond
	if !o.timeoutSet || granted <= o.sessionTimeout {
		return nil
	}
	return optionError("session timeout %v: the ensemble granted %v, its least (its servers' minSessionTimeout, 2 ticks by default); ask for %v or more",
		o.sessionTimeout, granted, granted)
}

// urlConfig is what a URL says.
type urlConfig struct {
	servers            []string
	username, password string
	opts               []Option
}

// URLOptions returns the options the URL's parameters set.
func (cfg *urlConfig) URLOptions() []Option { return cfg.opts }

// params are the query parameters a URL may have.
var params = []string{"session_timeout", "connect_timeout"}

func badURL(format string, args ...any) error {
	return driverkit.BadURL("zklock", format, args...)
}

// parseURL reads a zk:// URL. Its errors wrap backend.ErrBadURL and never
// contain the password.
func parseURL(u *url.URL) (*urlConfig, error) {
	h, err := driverkit.ParseHostsURL("zklock", Scheme, DefaultPort, u)
	if err != nil {
		return nil, err
	}
	cfg := &urlConfig{servers: h.Hosts, username: h.Username, password: h.Password}
	if strings.Contains(cfg.username, ":") {
		return nil, badURL("a digest user name cannot contain ':'")
	}
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
	for _, k := range keys {
		v := q.Get(k)
		d, err := time.ParseDuration(v)
		switch k {
		case "session_timeout":
			if err == nil && d < minSessionTimeout {
				err = fmt.Errorf("below %v, less than ZooKeeper servers grant (2 ticks at least: 4s with the usual tickTime of 2s)", minSessionTimeout)
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
