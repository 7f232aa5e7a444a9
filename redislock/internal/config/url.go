package config

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golocker/locker/internal/driverkit"
	"github.com/golocker/locker/redislock/internal/keys"
)

// The URL schemes of the drivers.
const (
	Scheme         = "redis"
	SchemeTLS      = "rediss"
	SchemeSentinel = "redis+sentinel"
	SchemeCluster  = "redis+cluster"
	SchemeRedLock  = "redlock"
)

// MinRedLockInstances is the fewest instances a RedLock takes: with
// fewer, a majority cannot survive the loss of one.
const MinRedLockInstances = 3

// URL is what a URL says.
type URL struct {
	Scheme             string
	Addrs              []string
	username, password string
	db                 int
	master             string // Sentinel
	sentinelUsername   string
	sentinelPassword   string
	dialTimeout        time.Duration
	readTimeout        time.Duration
	writeTimeout       time.Duration
	poolSize           int
	tls                driverkit.TLSParams // rediss
	opts               []Option
}

// URLOptions returns the options the URL's parameters set.
func (cfg *URL) URLOptions() []Option { return cfg.opts }

// Query parameters by scheme. Every scheme takes the common ones.
var (
	commonParams = []string{"key_prefix", "dial_timeout", "read_timeout", "write_timeout", "pool_size"}
	driverParams = []string{"wait_replicas", "wait_timeout", "batch", "keyspace_events"}
	schemeParams = map[string][]string{
		Scheme:         driverParams,
		SchemeTLS:      slices.Concat(driverParams, driverkit.TLSParamNames),
		SchemeSentinel: slices.Concat(driverParams, []string{"sentinel_username", "sentinel_password"}),
		SchemeCluster:  driverParams,
		SchemeRedLock:  {"instance_timeout"},
	}
	defaultPorts = map[string]string{
		Scheme: "6379", SchemeTLS: "6379", SchemeSentinel: "26379", SchemeCluster: "6379", SchemeRedLock: "6379",
	}
)

// DefaultWaitTimeout is WAIT's timeout when wait_replicas has none.
const DefaultWaitTimeout = 50 * time.Millisecond

// BadURL reports a bad URL. It matches backend.ErrBadURL with errors.Is.
func BadURL(format string, args ...any) error {
	return driverkit.BadURL("redislock", format, args...)
}

// ParseURL reads u without touching the network or the file system. Its
// errors wrap backend.ErrBadURL and never contain the password.
func ParseURL(u *url.URL) (*URL, error) {
	cfg := &URL{Scheme: strings.ToLower(u.Scheme)}
	params, ok := schemeParams[cfg.Scheme]
	if !ok {
		return nil, BadURL("scheme %q is not one of redis, rediss, redis+sentinel, redis+cluster, redlock", u.Scheme)
	}
	if u.Opaque != "" {
		return nil, BadURL("%s: want %s://host...", cfg.Scheme, cfg.Scheme)
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return nil, BadURL("%s: a URL fragment (#...) means nothing here", cfg.Scheme)
	}
	if u.User != nil {
		cfg.username = u.User.Username()
		cfg.password, _ = u.User.Password()
	}
	if err := cfg.parseHosts(u.Host); err != nil {
		return nil, err
	}
	if err := cfg.parsePath(u.Path); err != nil {
		return nil, err
	}
	if err := cfg.parseQuery(u.RawQuery, params); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (cfg *URL) parseHosts(hostList string) error {
	addrs, err := driverkit.Hosts(hostList, defaultPorts[cfg.Scheme])
	if err != nil {
		return BadURL("%s: %v", cfg.Scheme, err)
	}
	cfg.Addrs = addrs
	switch cfg.Scheme {
	case Scheme, SchemeTLS:
		if len(cfg.Addrs) > 1 {
			return BadURL("%s: one host only (for several, use redis+sentinel:// or redis+cluster://)", cfg.Scheme)
		}
	case SchemeRedLock:
		if len(cfg.Addrs) < MinRedLockInstances {
			return BadURL("redlock: %d hosts, RedLock needs at least %d independent instances", len(cfg.Addrs), MinRedLockInstances)
		}
	}
	return nil
}

func (cfg *URL) parsePath(path string) error {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) == 1 && parts[0] == "" {
		parts = nil
	}
	if cfg.Scheme == SchemeSentinel {
		if len(parts) == 0 || parts[0] == "" {
			return BadURL("redis+sentinel: no master name (want redis+sentinel://h1:26379,h2:26379/mastername[/db])")
		}
		cfg.master, parts = parts[0], parts[1:]
	}
	switch {
	case len(parts) == 0:
		return nil
	case cfg.Scheme == SchemeCluster:
		return BadURL("redis+cluster: a Cluster has no database number, got path %q", path)
	case len(parts) > 1:
		return BadURL("%s: bad path %q", cfg.Scheme, path)
	}
	db, err := strconv.Atoi(parts[0])
	if err != nil || db < 0 {
		return BadURL("%s: bad database number %q", cfg.Scheme, parts[0])
	}
	cfg.db = db
	return nil
}

func (cfg *URL) parseQuery(raw string, schemeParams []string) error {
	q, names, err := driverkit.Query(raw, slices.Concat(commonParams, schemeParams))
	if err != nil {
		return BadURL("%s: %v", cfg.Scheme, err)
	}
	var waitReplicas int
	waitTimeout := time.Duration(0)
	for _, k := range names {
		v := q.Get(k)
		var err error
		switch k {
		case "key_prefix":
			err = keys.ValidPrefix(v)
			cfg.opts = append(cfg.opts, WithKeyPrefix(v))
		case "dial_timeout":
			cfg.dialTimeout, err = positiveDuration(v)
		case "read_timeout":
			cfg.readTimeout, err = positiveDuration(v)
		case "write_timeout":
			cfg.writeTimeout, err = positiveDuration(v)
		case "pool_size":
			cfg.poolSize, err = positiveInt(v)
		case "wait_replicas":
			waitReplicas, err = strconv.Atoi(v)
			if err == nil && waitReplicas < 0 {
				err = errors.New("must not be negative")
			}
		case "wait_timeout":
			waitTimeout, err = positiveDuration(v)
		case "batch":
			var n int
			if n, err = strconv.Atoi(v); err == nil && (n < 0 || n > MaxBatch) {
				err = fmt.Errorf("must be 0 to %d", MaxBatch)
			}
			cfg.opts = append(cfg.opts, WithBatch(n))
		case "keyspace_events":
			var on bool
			on, err = strconv.ParseBool(v)
			cfg.opts = append(cfg.opts, WithKeyspaceEvents(on))
		case "instance_timeout":
			var d time.Duration
			d, err = positiveDuration(v)
			cfg.opts = append(cfg.opts, WithInstanceTimeout(d))
		case "sentinel_username":
			cfg.sentinelUsername = v
		case "sentinel_password":
			cfg.sentinelPassword = v
		case "tls_server_name":
			cfg.tls.ServerName = v
		case "tls_insecure_skip_verify":
			cfg.tls.InsecureSkipVerify, err = strconv.ParseBool(v)
		case "tls_ca_file":
			cfg.tls.CAFile = v
		case "tls_cert_file":
			cfg.tls.CertFile = v
		case "tls_key_file":
			cfg.tls.KeyFile = v
		}
		if err != nil {
			if strings.Contains(k, "password") {
				return BadURL("%s: bad %s", cfg.Scheme, k)
			}
			return BadURL("%s: bad %s %q: %v", cfg.Scheme, k, v, err)
		}
	}
	switch {
	case waitTimeout > 0 && waitReplicas == 0:
		return BadURL("%s: wait_timeout needs wait_replicas", cfg.Scheme)
	case waitReplicas > 0:
		if waitTimeout == 0 {
			waitTimeout = DefaultWaitTimeout
		}
		cfg.opts = append(cfg.opts, WithWaitReplicas(waitReplicas, waitTimeout))
	}
	if cfg.Scheme == SchemeTLS && (cfg.tls.CertFile == "") != (cfg.tls.KeyFile == "") {
		return BadURL("rediss: tls_cert_file and tls_key_file go together")
	}
	return nil
}

func positiveDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil && d <= 0 {
		err = errors.New("must be positive")
	}
	return d, err
}

func positiveInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err == nil && n < 1 {
		err = errors.New("must be at least 1")
	}
	return n, err
}
