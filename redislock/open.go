package redislock

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
	"github.com/golocker/locker/redislock/internal/config"
	"github.com/golocker/locker/redislock/internal/keyspace"
	"github.com/golocker/locker/redislock/redlock"
)

// URL schemes this package registers with package locker. Importing it
// also imports package redlock, which registers redlock://.
const (
	Scheme         = "redis"          // redis://[user:pass@]host[:6379][/db]
	SchemeTLS      = "rediss"         // rediss://[user:pass@]host[:6379][/db], TLS
	SchemeSentinel = "redis+sentinel" // redis+sentinel://[user:pass@]h1:26379,h2:26379/master[/db]
	SchemeCluster  = "redis+cluster"  // redis+cluster://[user:pass@]h1:7000,h2:7001
)

// opener opens the URLs of the Driver's schemes.
var opener = driverkit.Opener[*config.URL, config.Options, Option, backend.Driver]{Pkg: "redislock", Parse: parse, Defaults: config.Defaults, Open: open}

func init() {
	for _, s := range []string{Scheme, SchemeTLS, SchemeSentinel, SchemeCluster} {
		locker.Register(s, opener.ForLocker)
	}
}

// Open returns the driver for rawURL, as locker.Open would use it: a
// *Driver for redis://, rediss://, redis+sentinel:// and redis+cluster://,
// a *redlock.Driver for redlock:// (redlock.Open). It creates the go-redis
// clients, which the driver's Close closes, and checks that the servers
// answer (for RedLock, a majority of them). opts apply after the URL's
// parameters.
//
// Open returns within DefaultOpenTimeout when ctx has no deadline (a
// deadline of ctx governs instead), and its error names the cause: a
// connection refused, an unknown host, a TLS handshake with a server that
// does not speak TLS (or a server that closes a connection without TLS:
// it may expect rediss://), authentication failed. The password never
// appears in an error.
func Open(ctx context.Context, rawURL string, opts ...Option) (backend.Driver, error) {
	if u, err := url.Parse(rawURL); err == nil && strings.EqualFold(u.Scheme, redlock.Scheme) {
		rl, err := redlock.Open(ctx, rawURL, opts...)
		if err != nil {
			return nil, err
		}
		return rl, nil
	}
	return opener.OpenRaw(ctx, rawURL, opts)
}

// parse reads a URL of the Driver's schemes; redlock:// is package
// redlock's.
func parse(u *url.URL) (*config.URL, error) {
	cfg, err := config.ParseURL(u)
	if err == nil && cfg.Scheme == config.SchemeRedLock {
		return nil, config.BadURL("redlock: opened by package redlock")
	}
	return cfg, err
}

// open makes the Driver of a URL's cfg, with options o.
func open(ctx context.Context, cfg *config.URL, o config.Options) (backend.Driver, error) {
	ctx, cancel := driverkit.OpenContext(ctx, DefaultOpenTimeout)
	defer cancel()
	if err := o.Refuse("a Redis Driver", "WithInstanceTimeout"); err != nil {
		return nil, err
	}
	dials := config.NewDialLog(o.Dialer)
	client, err := cfg.Client(dials)
	if err != nil {
		return nil, err
	}
	d := newDriver(client, o, true)
	d.dials = dials
	if err := d.pingFirst(ctx, cfg, o.Dialer); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("PING: %w", err)
	}
	watch, err := keyspace.Published(ctx, client, o.KeyspaceEvents)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	if watch {
		d.watchKeys()
	}
	return d, nil
}

// pingFirst PINGs the Driver's servers, within ctx, beside probes of
// the URL's hosts that end it at once when none can be reached (connection
// refused, unknown host, no TLS): go-redis retries those until ctx ends,
// and a server that does not speak TLS may never answer a handshake. Its
// error names the cause.
func (d *Driver) pingFirst(ctx context.Context, cfg *config.URL, dial driverkit.DialFunc) error {
	var tc *tls.Config
	if cfg.Scheme == SchemeTLS {
		var err error
		if tc, err = cfg.TLSConfig(); err != nil {
			return err
		}
	}
	_, err := driverkit.Reach(ctx, dial, cfg.Addrs, tc, false, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.storeErr(pingWithin(ctx, d.client))
	})
	return config.ConnectError(err, tc != nil)
}

// pingWithin PINGs client, returning when ctx ends even if go-redis does
// not (a Sentinel client looks for its master first).
func pingWithin(ctx context.Context, client redis.UniversalClient) error {
	return driverkit.WithinErr(ctx, func() error { return client.Ping(ctx).Err() })
}
