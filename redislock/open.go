package redislock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// URL schemes this package registers with package locker.
const (
	Scheme         = "redis"          // redis://[user:pass@]host[:6379][/db]
	SchemeTLS      = "rediss"         // rediss://[user:pass@]host[:6379][/db], TLS
	SchemeSentinel = "redis+sentinel" // redis+sentinel://[user:pass@]h1:26379,h2:26379/master[/db]
	SchemeCluster  = "redis+cluster"  // redis+cluster://[user:pass@]h1:7000,h2:7001
	SchemeRedLock  = "redlock"        // redlock://[user:pass@]h1:6379,h2:6379,h3:6379[/db]
)

// opener opens the URLs of every scheme.
var opener = driverkit.Opener[*urlConfig, options, Option, backend.Driver]{Pkg: "redislock", Parse: parseURL, Defaults: defaultOptions, Open: open}

func init() {
	for _, s := range []string{Scheme, SchemeTLS, SchemeSentinel, SchemeCluster, SchemeRedLock} {
		locker.Register(s, opener.ForLocker)
	}
}

// Open returns the driver for rawURL, as locker.Open would use it: a
// *Driver for redis://, rediss://, redis+sentinel:// and redis+cluster://,
// a *RedLock for redlock://. It creates the go-redis clients, which the
// driver's Close closes, and checks that the servers answer (for RedLock,
// a majority of them). opts apply after the URL's parameters.
//
// Open returns within DefaultOpenTimeout when ctx has no deadline (a
// deadline of ctx governs instead), and its error names the cause: a
// connection refused, an unknown host, a TLS handshake with a server that
// does not speak TLS (or a server that closes a connection without TLS:
// it may expect rediss://), authentication failed. The password never
// appears in an error.
func Open(ctx context.Context, rawURL string, opts ...Option) (backend.Driver, error) {
	return opener.OpenRaw(ctx, rawURL, opts)
}

// open makes the driver of a URL's cfg, with options o.
func open(ctx context.Context, cfg *urlConfig, o options) (backend.Driver, error) {
	ctx, cancel := driverkit.OpenContext(ctx, DefaultOpenTimeout)
	defer cancel()
	dials := newDialLog(o.Dialer)
	if cfg.scheme == SchemeRedLock {
		if err := o.refuse("RedLock", "WithWaitReplicas", "WithKeyspaceEvents"); err != nil {
			return nil, err
		}
		clients := make([]redis.UniversalClient, len(cfg.addrs))
		for i, a := range cfg.addrs {
			clients[i] = redis.NewClient(cfg.clientOptions(a, nil, dials.Dial))
		}
		rl := newRedLock(clients, o, true)
		if err := rl.ping(ctx); err != nil {
			_ = rl.Close()
			return nil, err
		}
		return rl, nil
	}
	if err := o.refuse("a Redis Driver", "WithInstanceTimeout"); err != nil {
		return nil, err
	}
	client, err := cfg.client(dials)
	if err != nil {
		return nil, err
	}
	d := newDriver(client, o, true)
	d.dials = dials
	if err := d.pingFirst(ctx, cfg, o.Dialer); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("PING: %w", err)
	}
	watch, err := keyspaceEventsOn(ctx, client, o.keyspaceEvents)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	if watch {
		d.watch = newWatcher(d)
	}
	return d, nil
}

// keyspaceEventsOn decides whether a Driver opened from a URL watches its
// keys: as the option (or URL parameter) says, else when every master
// publishes the keyspace events it needs. Asked for them, it fails if a
// master says it lacks them; a master that does not answer CONFIG GET (a
// managed service, a user without the right) counts as lacking them
// unless the option says otherwise.
func keyspaceEventsOn(ctx context.Context, client redis.UniversalClient, opt *bool) (bool, error) {
	if opt != nil && !*opt {
		return false, nil
	}
	var mu sync.Mutex
	var lacking []string
	unknown := false
	err := driverkit.WithinErr(ctx, func() error {
		return forEachMaster(ctx, client, func(ctx context.Context, c redis.Cmdable) error {
			v, err := c.ConfigGet(ctx, "notify-keyspace-events").Result()
			mu.Lock()
			defer mu.Unlock()
			var re redis.Error
			switch {
			case errors.As(err, &re):
				unknown = true
			case err != nil:
				return err
			case !publishesKeyspaceEvents(v["notify-keyspace-events"]):
				lacking = append(lacking, fmt.Sprintf("%s has %q", addrOfCmdable(c), v["notify-keyspace-events"]))
			}
			return nil
		})
	})
	switch {
	case err != nil && opt == nil:
		// Not known: the Driver does not watch.
		return false, nil
	case err != nil:
		return false, fmt.Errorf("redislock: keyspace_events: CONFIG GET notify-keyspace-events: %w", err)
	case len(lacking) > 0 && opt != nil:
		return false, optionError("keyspace_events=true, but notify-keyspace-events lacks K, g or x (e.g. Kgx): %s", strings.Join(lacking, "; "))
	case len(lacking) > 0, unknown && opt == nil:
		return false, nil
	}
	return true, nil
}

// publishesKeyspaceEvents reports whether a notify-keyspace-events value
// publishes what a Driver watches: keyspace events (K) of generic commands
// (g: DEL, UNLINK, RENAME…) and of expiries (x); A stands for every class.
func publishesKeyspaceEvents(flags string) bool {
	has := func(c string) bool { return strings.Contains(flags, c) }
	return has("K") && (has("A") || has("g") && has("x"))
}

// addrOfCmdable names a server for an error.
func addrOfCmdable(c redis.Cmdable) string {
	// A Sentinel client's Addr is a placeholder: it asks the sentinels.
	if cl, ok := c.(*redis.Client); ok && cl.Options().Addr != "FailoverClient" {
		return cl.Options().Addr
	}
	return "the master"
}

// pingWithin PINGs client, returning when ctx ends even if go-redis does
// not (a Sentinel client looks for its master first).
func pingWithin(ctx context.Context, client redis.UniversalClient) error {
	return driverkit.WithinErr(ctx, func() error { return client.Ping(ctx).Err() })
}

// pingFirst PINGs the Driver's servers, within ctx, beside probes of
// the URL's hosts that end it at once when none can be reached (connection
// refused, unknown host, no TLS): go-redis retries those until ctx ends,
// and a server that does not speak TLS may never answer a handshake. Its
// error names the cause.
func (d *Driver) pingFirst(ctx context.Context, cfg *urlConfig, dial driverkit.DialFunc) error {
	var tc *tls.Config
	if cfg.scheme == SchemeTLS {
		var err error
		if tc, err = cfg.tlsConfig(); err != nil {
			return err
		}
	}
	_, err := driverkit.Reach(ctx, dial, cfg.addrs, tc, false, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.storeErr(pingWithin(ctx, d.client))
	})
	return connectError(err, tc != nil)
}

// ping checks that a majority of the instances answer.
func (rl *RedLock) ping(ctx context.Context) error {
	results := rl.each(ctx, 10*time.Second, func(ctx context.Context, _ int, c redis.UniversalClient) (any, error) {
		return nil, c.Ping(ctx).Err()
	})
	var errs []error
	for i, r := range results {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addrOfCmdable(rl.clients[i]), connectError(r.err, false)))
		}
	}
	if len(errs) > len(rl.clients)-rl.quorum {
		return fmt.Errorf("redislock: %d of %d RedLock instances do not answer PING: %w", len(errs), len(rl.clients), joinErrors(errs))
	}
	return nil
}

// client creates the go-redis client of a redis, rediss, redis+sentinel or
// redis+cluster URL. ContextTimeoutEnabled makes ctx deadlines bound
// network calls.
func (cfg *urlConfig) client(dials *dialLog) (redis.UniversalClient, error) {
	dial := dials.Dial
	switch cfg.scheme {
	case SchemeTLS:
		tc, err := cfg.tlsConfig()
		if err != nil {
			return nil, err
		}
		// The log records the handshake's errors too.
		o := cfg.clientOptions(cfg.addrs[0], nil, dials.record(tlsDial(dials.dial, tc)))
		o.TLSConfig = tc
		return redis.NewClient(o), nil
	case SchemeSentinel:
		u := cfg.universal(cfg.addrs, dial)
		u.MasterName, u.SentinelUsername, u.SentinelPassword = cfg.master, cfg.sentinelUsername, cfg.sentinelPassword
		return redis.NewFailoverClient(u.Failover()), nil
	case SchemeCluster:
		return redis.NewClusterClient(cfg.universal(cfg.addrs, dial).Cluster()), nil
	}
	return redis.NewClient(cfg.clientOptions(cfg.addrs[0], nil, dial)), nil
}

// universal returns the go-redis options of the URL's settings, for the
// servers addrs: go-redis turns them into those of each kind of client.
func (cfg *urlConfig) universal(addrs []string, dial driverkit.DialFunc) *redis.UniversalOptions {
	return &redis.UniversalOptions{
		Addrs:                 addrs,
		Username:              cfg.username,
		Password:              cfg.password,
		DB:                    cfg.db,
		DialTimeout:           cfg.dialTimeout,
		ReadTimeout:           cfg.readTimeout,
		WriteTimeout:          cfg.writeTimeout,
		PoolSize:              cfg.poolSize,
		ContextTimeoutEnabled: true,
		Dialer:                dial,
	}
}

func (cfg *urlConfig) clientOptions(addr string, tc *tls.Config, dial driverkit.DialFunc) *redis.Options {
	if tc != nil {
		dial = tlsDial(dial, tc)
	}
	o := cfg.universal([]string{addr}, dial).Simple()
	o.TLSConfig = tc
	return o
}

// tlsConfig builds the TLS configuration of a rediss URL, reading the
// files it names. The server name defaults to the host's.
func (cfg *urlConfig) tlsConfig() (*tls.Config, error) {
	tc, err := cfg.tls.Config()
	if err != nil {
		return nil, badURL("rediss: %v", err)
	}
	if tc.ServerName == "" {
		tc.ServerName, _, _ = net.SplitHostPort(cfg.addrs[0])
	}
	return tc, nil
}

// tlsDial wraps dial with a TLS handshake: go-redis does its own TLS only
// when it dials itself.
func tlsDial(dial driverkit.DialFunc, tc *tls.Config) driverkit.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return driverkit.Handshake(ctx, c, tc)
	}
}

// dialLog remembers the last error of a client's dials: go-redis retries a
// dial until the call's ctx ends, and then reports only the ctx's error. A
// TLS handshake that the ctx's end cut short counts: a server that does
// not speak TLS may never answer it.
type dialLog struct {
	mu   sync.Mutex
	err  error
	dial driverkit.DialFunc
}

func newDialLog(dial driverkit.DialFunc) *dialLog {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return &dialLog{dial: dial}
}

// Dial dials through the log's dial function and records the outcome.
func (l *dialLog) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return l.record(l.dial)(ctx, network, addr)
}

// record returns dial, its outcomes recorded in the log.
func (l *dialLog) record(dial driverkit.DialFunc) driverkit.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err == nil || ctx.Err() == nil || driverkit.IsHandshake(err) {
			l.mu.Lock()
			l.err = err
			l.mu.Unlock()
		}
		return c, err
	}
}

// last returns the last dial error, or nil after a dial succeeded.
func (l *dialLog) last() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// connectError names the cause of err, an error of connecting to Redis
// (driverkit.Cause).
func connectError(err error, tlsOn bool) error {
	return driverkit.ConnectError(err, tlsOn, authCause)
}

// authCause tells Redis's refusals of the credentials: a wrong password or
// user (WRONGPASS, or "invalid password" before Redis 6), none where one
// is required (NOAUTH), a password where none is set ("ERR AUTH ...").
func authCause(err error) string {
	var re redis.Error
	if !errors.As(err, &re) {
		return ""
	}
	msg := re.Error()
	for _, p := range []string{"WRONGPASS", "NOAUTH", "ERR AUTH", "ERR invalid password"} {
		if strings.HasPrefix(msg, p) {
			return driverkit.CauseAuth
		}
	}
	return ""
}
