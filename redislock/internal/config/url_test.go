package config

import (
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/golocker/locker/internal/driverkit"
	"github.com/golocker/locker/internal/drivertest"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want URL     // compared: scheme, addrs, username, password, db, master, sentinel creds, timeouts, pool size
		opts Options // the URL's options applied to the zero options
	}{
		{url: "redis://127.0.0.1:6390", want: URL{Scheme: Scheme, Addrs: []string{"127.0.0.1:6390"}}},
		{url: "redis://localhost", want: URL{Scheme: Scheme, Addrs: []string{"localhost:6379"}}},
		{url: "REDIS://h:1/3", want: URL{Scheme: Scheme, Addrs: []string{"h:1"}, db: 3}},
		{url: "redis://u:p%40ss@h:1/", want: URL{Scheme: Scheme, Addrs: []string{"h:1"}, username: "u", password: "p@ss"}},
		{url: "redis://:pw@h:1/0", want: URL{Scheme: Scheme, Addrs: []string{"h:1"}, password: "pw"}},
		{url: "redis://[::1]:7/1", want: URL{Scheme: Scheme, Addrs: []string{"[::1]:7"}, db: 1}},
		{url: "redis://[::1]", want: URL{Scheme: Scheme, Addrs: []string{"[::1]:6379"}}},
		{
			url:  "redis://h:1?key_prefix=app:&wait_replicas=2&wait_timeout=1s&dial_timeout=2s&read_timeout=3s&write_timeout=4s&pool_size=9",
			want: URL{Scheme: Scheme, Addrs: []string{"h:1"}, dialTimeout: 2 * time.Second, readTimeout: 3 * time.Second, writeTimeout: 4 * time.Second, poolSize: 9},
			opts: Options{KeyPrefix: "app:", WaitReplicas: 2, WaitTimeout: time.Second},
		},
		{
			url:  "redis://h:1?wait_replicas=1",
			want: URL{Scheme: Scheme, Addrs: []string{"h:1"}},
			opts: Options{WaitReplicas: 1, WaitTimeout: DefaultWaitTimeout},
		},
		{url: "redis://h:1?key_prefix=", want: URL{Scheme: Scheme, Addrs: []string{"h:1"}}, opts: Options{KeyPrefix: ""}},
		{url: "redis://h:1?batch=8", want: URL{Scheme: Scheme, Addrs: []string{"h:1"}}, opts: Options{Batch: 8}},
		{url: "redis+cluster://h:1?batch=0", want: URL{Scheme: SchemeCluster, Addrs: []string{"h:1"}}},
		{url: "redis://h:1?keyspace_events=true", want: URL{Scheme: Scheme, Addrs: []string{"h:1"}}, opts: Options{KeyspaceEvents: ptr(true)}},
		{url: "redis+sentinel://s1/m?keyspace_events=0", want: URL{Scheme: SchemeSentinel, Addrs: []string{"s1:26379"}, master: "m"}, opts: Options{KeyspaceEvents: ptr(false)}},
		{
			url:  "rediss://u:p@h:6380/2?tls_server_name=x&tls_insecure_skip_verify=true",
			want: URL{Scheme: SchemeTLS, Addrs: []string{"h:6380"}, username: "u", password: "p", db: 2},
		},
		{
			url:  "redis+sentinel://:pw@s1:26379,s2,s3:26381/mymaster/4?sentinel_password=sp&sentinel_username=su",
			want: URL{Scheme: SchemeSentinel, Addrs: []string{"s1:26379", "s2:26379", "s3:26381"}, password: "pw", db: 4, master: "mymaster", sentinelUsername: "su", sentinelPassword: "sp"},
		},
		{url: "redis+sentinel://s1/m", want: URL{Scheme: SchemeSentinel, Addrs: []string{"s1:26379"}, master: "m"}},
		{url: "redis+cluster://h1:7000,h2:7001", want: URL{Scheme: SchemeCluster, Addrs: []string{"h1:7000", "h2:7001"}}},
		{url: "redis+cluster://u:p@h1:7000/", want: URL{Scheme: SchemeCluster, Addrs: []string{"h1:7000"}, username: "u", password: "p"}},
		{
			url:  "redlock://h1,h2:6379,h3:6379/5?instance_timeout=20ms",
			want: URL{Scheme: SchemeRedLock, Addrs: []string{"h1:6379", "h2:6379", "h3:6379"}, db: 5},
			opts: Options{InstanceTimeout: 20 * time.Millisecond},
		},
	} {
		t.Run(tc.url, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := ParseURL(u)
			if err != nil {
				t.Fatalf("ParseURL: %v", err)
			}
			got := *cfg
			got.opts, got.tls = nil, driverkit.TLSParams{}
			if !equalConfig(got, tc.want) {
				t.Errorf("ParseURL = %+v\nwant        %+v", got, tc.want)
			}
			o := drivertest.Applied(t, Options{}, cfg.opts)
			if o.KeyPrefix != tc.opts.KeyPrefix || o.WaitReplicas != tc.opts.WaitReplicas ||
				o.WaitTimeout != tc.opts.WaitTimeout || o.InstanceTimeout != tc.opts.InstanceTimeout || o.Batch != tc.opts.Batch ||
				(o.KeyspaceEvents == nil) != (tc.opts.KeyspaceEvents == nil) || o.KeyspaceEvents != nil && *o.KeyspaceEvents != *tc.opts.KeyspaceEvents {
				t.Errorf("options = %+v, want %+v", o, tc.opts)
			}
		})
	}
}

func equalConfig(a, b URL) bool {
	return a.Scheme == b.Scheme && slices.Equal(a.Addrs, b.Addrs) && a.username == b.username &&
		a.password == b.password && a.db == b.db && a.master == b.master &&
		a.sentinelUsername == b.sentinelUsername && a.sentinelPassword == b.sentinelPassword &&
		a.dialTimeout == b.dialTimeout && a.readTimeout == b.readTimeout &&
		a.writeTimeout == b.writeTimeout && a.poolSize == b.poolSize
}

func TestParseURLErrors(t *testing.T) {
	drivertest.BadURLs(t, ParseURL, map[string]string{
		"redis://":                                     "no host",
		"redis:///0":                                   "no host",
		"redis:h:1":                                    "want redis://",
		"redis://h:1#frag":                             "fragment",
		"redis://h1:1,h2:2":                            "one host only",
		"rediss://h1:1,h2:2":                           "one host only",
		"redis://h:0":                                  "bad port",
		"redis://h:99999":                              "bad port",
		"redis://h:1,,h:2":                             "empty host",
		"redis://:1":                                   "empty host name",
		"redis://h:1/x":                                "bad database number",
		"redis://h:1/-1":                               "bad database number",
		"redis://h:1/0/1":                              "bad path",
		"redis://h:1?db=2":                             `unknown parameter "db"`,
		"redis://h:1?keyprefix=x":                      `unknown parameter "keyprefix"`,
		"redis://h:1?instance_timeout=1s":              `unknown parameter "instance_timeout"`,
		"redis://h:1?tls_server_name=x":                `unknown parameter "tls_server_name"`,
		"redis://h:1?key_prefix=a&key_prefix=b":        "given 2 times",
		"redis://h:1?key_prefix=%7Bx":                  "hash tag",
		"redis://h:1?max_subscriptions=10":             `unknown parameter "max_subscriptions"`,
		"redis://h:1?dial_timeout=5":                   "bad dial_timeout",
		"redis://h:1?dial_timeout=-1s":                 "bad dial_timeout",
		"redis://h:1?pool_size=0":                      "bad pool_size",
		"redis://h:1?wait_replicas=-1":                 "bad wait_replicas",
		"redis://h:1?wait_timeout=1s":                  "wait_timeout needs wait_replicas",
		"redis://h:1?wait_replicas=1&wait_timeout=0s":  "bad wait_timeout",
		"redis://h:1?a=%zz":                            "bad query",
		"redis://h:1?batch=-1":                         "bad batch",
		"redis://h:1?batch=1001":                       "bad batch",
		"redis://h:1?batch=many":                       "bad batch",
		"redlock://h1:1,h2:2,h3:3?batch=2":             `unknown parameter "batch"`,
		"redis://h:1?keyspace_events=maybe":            "bad keyspace_events",
		"redlock://h1:1,h2:2,h3:3?keyspace_events=1":   `unknown parameter "keyspace_events"`,
		"rediss://h:1?tls_cert_file=c":                 "go together",
		"rediss://h:1?tls_insecure_skip_verify=maybe":  "bad tls_insecure_skip_verify",
		"redis+sentinel://s1:26379":                    "no master name",
		"redis+sentinel://s1:26379/m/x":                "bad database number",
		"redis+sentinel://s1:26379,s1:26379/m":         "given twice",
		"redis+cluster://h:1/0":                        "no database number",
		"redis+cluster://h:1?sentinel_password=x":      `unknown parameter "sentinel_password"`,
		"redlock://h1:1,h2:2":                          "at least 3",
		"redlock://h1:1,h2:2,h3:3?wait_replicas=1":     `unknown parameter "wait_replicas"`,
		"redlock://h1:1,h2:2,h3:3?instance_timeout=0s": "bad instance_timeout",
		"memcache://h:1":                               "scheme",
	})
}

// FuzzParseURL: ParseURL never panics, accepts only what it can use, and
// never puts the password in an error.
func FuzzParseURL(f *testing.F) {
	drivertest.FuzzURL(f, ParseURL, func(t *testing.T, raw string, cfg *URL) {
		if len(cfg.Addrs) == 0 {
			t.Fatalf("ParseURL(%q) accepted a URL without hosts", raw)
		}
		if cfg.Scheme == SchemeRedLock && len(cfg.Addrs) < MinRedLockInstances {
			t.Fatalf("ParseURL(%q) accepted a RedLock of %d instances", raw, len(cfg.Addrs))
		}
		if cfg.Scheme == SchemeSentinel && cfg.master == "" {
			t.Fatalf("ParseURL(%q) accepted a Sentinel URL without a master", raw)
		}
		drivertest.Applied(t, Options{}, cfg.opts)
	},
		"redis://h:1/0", "rediss://u:p@h:1?tls_server_name=x", "redis+sentinel://a,b:2/m/1",
		"redis+cluster://h1:1,h2:2", "redlock://a,b,c", "redis://h:1?wait_replicas=1&wait_timeout=1s",
		"redis://u:pw@[::1]:1/2?key_prefix=x", "redlock://a,b,c?instance_timeout=1ms", "redis://:@:/",
	)
}

func ptr[T any](v T) *T { return &v }
