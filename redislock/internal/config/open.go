package config

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/internal/driverkit"
)

// Client creates the go-redis client of a redis, rediss, redis+sentinel or
// redis+cluster URL, dialling through dials. ContextTimeoutEnabled makes
// ctx deadlines bound network calls.
func (cfg *URL) Client(dials *DialLog) (redis.UniversalClient, error) {
	dial := dials.Dial
	switch cfg.Scheme {
	case SchemeTLS:
		tc, err := cfg.TLSConfig()
		if err != nil {
			return nil, err
		}
		// The log records the handshake's errors too.
		o := cfg.clientOptions(cfg.Addrs[0], nil, dials.record(tlsDial(dials.dial, tc)))
		o.TLSConfig = tc
		return redis.NewClient(o), nil
	case SchemeSentinel:
		u := cfg.universal(cfg.Addrs, dial)
		u.MasterName, u.SentinelUsername, u.SentinelPassword = cfg.master, cfg.sentinelUsername, cfg.sentinelPassword
		return redis.NewFailoverClient(u.Failover()), nil
	case SchemeCluster:
		return redis.NewClusterClient(cfg.universal(cfg.Addrs, dial).Cluster()), nil
	}
	return redis.NewClient(cfg.clientOptions(cfg.Addrs[0], nil, dial)), nil
}

// InstanceClient creates the go-redis client of the server addr of the
// URL (one RedLock instance), dialling through dials.
func (cfg *URL) InstanceClient(addr string, dials *DialLog) *redis.Client {
	return redis.NewClient(cfg.clientOptions(addr, nil, dials.Dial))
}

// universal returns the go-redis options of the URL's settings, for the
// servers addrs: go-redis turns them into those of each kind of client.
func (cfg *URL) universal(addrs []string, dial driverkit.DialFunc) *redis.UniversalOptions {
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

func (cfg *URL) clientOptions(addr string, tc *tls.Config, dial driverkit.DialFunc) *redis.Options {
	if tc != nil {
		dial = tlsDial(dial, tc)
	}
	o := cfg.universal([]string{addr}, dial).Simple()
	o.TLSConfig = tc
	return o
}

// TLSConfig builds the TLS configuration of a rediss URL, reading the
// files it names. The server name defaults to the host's.
func (cfg *URL) TLSConfig() (*tls.Config, error) {
	tc, err := cfg.tls.Config()
	if err != nil {
		return nil, BadURL("rediss: %v", err)
	}
	if tc.ServerName == "" {
		tc.ServerName, _, _ = net.SplitHostPort(cfg.Addrs[0])
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

// DialLog remembers the last error of a client's dials: go-redis retries a
// dial until the call's ctx ends, and then reports only the ctx's error. A
// TLS handshake that the ctx's end cut short counts: a server that does
// not speak TLS may never answer it.
type DialLog struct {
	mu   sync.Mutex
	err  error
	dial driverkit.DialFunc
}

// NewDialLog returns the log of the dials through dial (nil: a
// net.Dialer's).
func NewDialLog(dial driverkit.DialFunc) *DialLog {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return &DialLog{dial: dial}
}

// Dial dials through the log's dial function and records the outcome.
func (l *DialLog) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return l.record(l.dial)(ctx, network, addr)
}

// record returns dial, its outcomes recorded in the log.
func (l *DialLog) record(dial driverkit.DialFunc) driverkit.DialFunc {
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

// Last returns the last dial error, or nil after a dial succeeded (or of
// a nil log).
func (l *DialLog) Last() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// ConnectError names the cause of err, an error of connecting to Redis
// (driverkit.Cause).
func ConnectError(err error, tlsOn bool) error {
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

// AddrOf names a server for an error.
func AddrOf(c redis.Cmdable) string {
	// A Sentinel client's Addr is a placeholder: it asks the sentinels.
	if cl, ok := c.(*redis.Client); ok && cl.Options().Addr != "FailoverClient" {
		return cl.Options().Addr
	}
	return "the master"
}
