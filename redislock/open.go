package redislock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

// URL schemes this package registers with package locker.
const (
	Scheme         = "redis"          // redis://[user:pass@]host[:6379][/db]
	SchemeTLS      = "rediss"         // rediss://[user:pass@]host[:6379][/db], TLS
	SchemeSentinel = "redis+sentinel" // redis+sentinel://[user:pass@]h1:26379,h2:26379/master[/db]
	SchemeCluster  = "redis+cluster"  // redis+cluster://[user:pass@]h1:7000,h2:7001
	SchemeRedLock  = "redlock"        // redlock://[user:pass@]h1:6379,h2:6379,h3:6379[/db]
)

func init() {
	for _, s := range []string{Scheme, SchemeTLS, SchemeSentinel, SchemeCluster, SchemeRedLock} {
		locker.Register(s, open)
	}
}

// Open returns the driver for rawURL, as locker.Open would use it: a
// *Driver for redis://, rediss://, redis+sentinel:// and redis+cluster://,
// a *RedLock for redlock://. It creates the go-redis clients, which the
// driver's Close closes, and checks that the servers answer (for RedLock,
// a majority of them). opts apply after the URL's parameters. The password
// never appears in an error.
func Open(ctx context.Context, rawURL string, opts ...Option) (backend.Driver, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the URL, password included
		}
		return nil, fmt.Errorf("redislock: open %s: %w: %v", locker.Redact(rawURL), backend.ErrBadURL, err)
	}
	d, err := openURL(ctx, u, opts)
	if err != nil {
		return nil, fmt.Errorf("redislock: open %s: %w", locker.Redact(rawURL), err)
	}
	return d, nil
}

func open(ctx context.Context, u *url.URL) (backend.Driver, error) { return openURL(ctx, u, nil) }

func openURL(ctx context.Context, u *url.URL, extra []Option) (backend.Driver, error) {
	cfg, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	o := defaultOptions()
	if err := o.apply(append(cfg.opts, extra...)); err != nil {
		return nil, err
	}
	if cfg.scheme == SchemeRedLock {
		if err := o.refuse("RedLock", "WithWaitReplicas"); err != nil {
			return nil, err
		}
		clients := make([]redis.UniversalClient, len(cfg.addrs))
		for i, a := range cfg.addrs {
			clients[i] = redis.NewClient(cfg.clientOptions(a, nil))
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
	client, err := cfg.client()
	if err != nil {
		return nil, err
	}
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("redislock: %s: PING: %w", strings.Join(cfg.addrs, ","), err)
	}
	return newDriver(client, o, true), nil
}

// ping checks that a majority of the instances answer.
func (rl *RedLock) ping(ctx context.Context) error {
	results := rl.each(ctx, 10*time.Second, func(ctx context.Context, _ int, c redis.UniversalClient) (any, error) {
		return nil, c.Ping(ctx).Err()
	})
	var errs []error
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
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
func (cfg *urlConfig) client() (redis.UniversalClient, error) {
	var tc *tls.Config
	if cfg.scheme == SchemeTLS {
		var err error
		if tc, err = cfg.tlsConfig(); err != nil {
			return nil, err
		}
	}
	switch cfg.scheme {
	case SchemeSentinel:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            cfg.master,
			SentinelAddrs:         cfg.addrs,
			SentinelUsername:      cfg.sentinelUsername,
			SentinelPassword:      cfg.sentinelPassword,
			Username:              cfg.username,
			Password:              cfg.password,
			DB:                    cfg.db,
			DialTimeout:           cfg.dialTimeout,
			ReadTimeout:           cfg.readTimeout,
			WriteTimeout:          cfg.writeTimeout,
			PoolSize:              cfg.poolSize,
			ContextTimeoutEnabled: true,
		}), nil
	case SchemeCluster:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 cfg.addrs,
			Username:              cfg.username,
			Password:              cfg.password,
			DialTimeout:           cfg.dialTimeout,
			ReadTimeout:           cfg.readTimeout,
			WriteTimeout:          cfg.writeTimeout,
			PoolSize:              cfg.poolSize,
			ContextTimeoutEnabled: true,
		}), nil
	}
	return redis.NewClient(cfg.clientOptions(cfg.addrs[0], tc)), nil
}

func (cfg *urlConfig) clientOptions(addr string, tc *tls.Config) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		Username:              cfg.username,
		Password:              cfg.password,
		DB:                    cfg.db,
		TLSConfig:             tc,
		DialTimeout:           cfg.dialTimeout,
		ReadTimeout:           cfg.readTimeout,
		WriteTimeout:          cfg.writeTimeout,
		PoolSize:              cfg.poolSize,
		ContextTimeoutEnabled: true,
	}
}

// tlsConfig builds the TLS configuration of a rediss URL, reading the
// files it names.
func (cfg *urlConfig) tlsConfig() (*tls.Config, error) {
	t := cfg.tlsParams()
	host, _, _ := net.SplitHostPort(cfg.addrs[0])
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         host,
		InsecureSkipVerify: t.insecureSkipVerify, //nolint:gosec // asked for in the URL
	}
	if t.serverName != "" {
		tc.ServerName = t.serverName
	}
	if t.caFile != "" {
		pem, err := os.ReadFile(t.caFile)
		if err != nil {
			return nil, fmt.Errorf("redislock: tls_ca_file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redislock: tls_ca_file %s: no PEM certificate in it", t.caFile)
		}
	}
	if t.certFile != "" {
		cert, err := tls.LoadX509KeyPair(t.certFile, t.keyFile)
		if err != nil {
			return nil, fmt.Errorf("redislock: tls_cert_file/tls_key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
