package etcdlock

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golocker/locker/internal/driverkit"
	"github.com/golocker/locker/internal/drivertest"
)

// parsed is what a test compares of a URL: its config and the options its
// parameters set.
type parsed struct {
	endpoints          []string
	username, password string
	tls                *driverkit.TLSParams
	prefix             string
	sessionTTL         time.Duration
	dialTimeout        time.Duration
}

func parse(t *testing.T, raw string) (parsed, error) {
	t.Helper()
	cfg, err := parseURL(drivertest.URL(t, raw))
	if err != nil {
		return parsed{}, err
	}
	o := drivertest.Applied(t, defaultOptions(), cfg.opts)
	return parsed{
		endpoints: cfg.endpoints, username: cfg.username, password: cfg.password, tls: cfg.tls,
		prefix: o.prefix, sessionTTL: o.sessionTTL, dialTimeout: o.dialTimeout,
	}, nil
}

func TestParseURL(t *testing.T) {
	drivertest.HostsURLs(t, Scheme, DefaultPort, parseURL, func(cfg *urlConfig) driverkit.HostsURL {
		return driverkit.HostsURL{Hosts: cfg.endpoints, Username: cfg.username, Password: cfg.password}
	})
	def := func(p parsed) parsed {
		if p.prefix == "" {
			p.prefix = DefaultPrefix
		}
		if p.sessionTTL == 0 {
			p.sessionTTL = DefaultSessionTTL
		}
		if p.dialTimeout == 0 {
			p.dialTimeout = DefaultDialTimeout
		}
		return p
	}
	for _, tc := range []struct {
		url  string
		want parsed
	}{
		{"etcd://localhost", parsed{endpoints: []string{"localhost:2379"}}},
		{"etcd://[::1]:7/locks", parsed{endpoints: []string{"[::1]:7"}, prefix: "/locks"}},
		{"etcd://h:1/a/b/", parsed{endpoints: []string{"h:1"}, prefix: "/a/b"}},
		{"etcd://h:1/sp%20ace", parsed{endpoints: []string{"h:1"}, prefix: "/sp ace"}},
		{
			"etcd://h:1?session_ttl=3s&dial_timeout=250ms",
			parsed{endpoints: []string{"h:1"}, sessionTTL: 3 * time.Second, dialTimeout: 250 * time.Millisecond},
		},
		{"etcd://h:1?session_ttl=1m", parsed{endpoints: []string{"h:1"}, sessionTTL: time.Minute}},
		{"etcd://h:1?tls=true", parsed{endpoints: []string{"h:1"}, tls: &driverkit.TLSParams{}}},
		{"etcd://h:1?tls=false", parsed{endpoints: []string{"h:1"}}},
		{
			"etcd://h:1?tls_ca_file=/ca.pem&tls_cert_file=/c.pem&tls_key_file=/k.pem&tls_server_name=etcd&tls_insecure_skip_verify=1",
			parsed{endpoints: []string{"h:1"}, tls: &driverkit.TLSParams{CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", ServerName: "etcd", InsecureSkipVerify: true}},
		},
	} {
		t.Run(tc.url, func(t *testing.T) {
			got, err := parse(t, tc.url)
			if err != nil {
				t.Fatalf("parseURL: %v", err)
			}
			want := def(tc.want)
			if !slices.Equal(got.endpoints, want.endpoints) || got.username != want.username || got.password != want.password ||
				got.prefix != want.prefix || got.sessionTTL != want.sessionTTL || got.dialTimeout != want.dialTimeout ||
				(got.tls == nil) != (want.tls == nil) || (got.tls != nil && *got.tls != *want.tls) {
				t.Errorf("parseURL = %+v (tls %+v)\nwant       %+v (tls %+v)", got, got.tls, want, want.tls)
			}
		})
	}
}

func TestParseURLErrors(t *testing.T) {
	drivertest.HostsURLErrors(t, Scheme, parseURL)
	drivertest.BadURLs(t, parseURL, map[string]string{
		"etcd://h:1/a//b":                          "empty segment",
		"etcd://h:1?prefix=x":                      `unknown parameter "prefix"`,
		"etcd://h:1?sessionttl=1s":                 `unknown parameter "sessionttl"`,
		"etcd://h:1?session_ttl=1s&session_ttl=2s": "given 2 times",
		"etcd://h:1?session_ttl=1500ms":            "whole number of seconds",
		"etcd://h:1?session_ttl=0s":                "whole number of seconds",
		"etcd://h:1?session_ttl=10":                "bad session_ttl",
		"etcd://h:1?dial_timeout=-1s":              "bad dial_timeout",
		"etcd://h:1?tls=maybe":                     "bad tls",
		"etcd://h:1?tls=false&tls_ca_file=x":       "tls=false with tls_ parameters",
		"etcd://h:1?tls_cert_file=c":               "go together",
		"etcd://h:1?tls_insecure_skip_verify=x":    "bad tls_insecure_skip_verify",
	}, "secret")
}

// TestOpenErrorsHideThePassword opens URLs that fail after parsing (a TLS
// file that is missing, nothing listening) and checks that the password
// appears in no error, through Open and through locker.Open.
func TestOpenErrorsHideThePassword(t *testing.T) {
	drivertest.OpenFailures(t, "Pa55-w0rd", 30*time.Second, Open,
		"etcd://u:Pa55-w0rd@127.0.0.1:1?dial_timeout=200ms",
		"etcd://u:Pa55-w0rd@127.0.0.1:1?tls_ca_file=/nonexistent/ca.pem",
		"etcd://u:Pa55-w0rd@h:1/a//b",
		"etcd://u:Pa55-w0rd@127.0.0.1:1?%zz",
	)
}

func TestOptions(t *testing.T) {
	drivertest.BadOptions(t, defaultOptions,
		drivertest.BadOption[Option]{Name: "session TTL below a second", Opt: WithSessionTTL(500 * time.Millisecond), Want: "whole number of seconds"},
		drivertest.BadOption[Option]{Name: "session TTL not whole seconds", Opt: WithSessionTTL(1500 * time.Millisecond), Want: "whole number of seconds"},
		drivertest.BadOption[Option]{Name: "prefix without a slash", Opt: WithPrefix("locks"), Want: "does not start with '/'"},
		drivertest.BadOption[Option]{Name: "prefix with a trailing slash", Opt: WithPrefix("/locks/"), Want: "ends with '/'"},
		drivertest.BadOption[Option]{Name: "nil TLS config", Opt: WithTLSConfig(nil), Want: "nil TLS config"},
		drivertest.BadOption[Option]{Name: "zero dial timeout", Opt: WithDialTimeout(0), Want: "must be positive"},
	)
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
}

func TestNameOfKeys(t *testing.T) {
	d := &Driver{prefix: "/p"}
	for _, name := range []string{"a", "a/b", "%", "%2F", "a%/b/", "ünï/cødé%25", "//", "x y+z"} {
		key := d.namePrefix(name) + "0123456789abcdef"
		if strings.Count(key, "/") != 3 {
			t.Errorf("key %q of %q has a '/' of the name's", key, name)
		}
		if got, ok := d.nameOf(key); !ok || got != name {
			t.Errorf("nameOf(%q) = %q, %v; want %q", key, got, ok, name)
		}
	}
	for _, key := range []string{"/q/a/1", "/p/a", "/p/a/", "/p/%zz/1"} {
		if name, ok := d.nameOf(key); ok {
			t.Errorf("nameOf(%q) = %q, want none", key, name)
		}
	}
}

// FuzzParseURL checks that no URL makes the parser panic, that every error
// wraps ErrBadURL and hides the password, and that what it accepts is
// usable.
func FuzzParseURL(f *testing.F) {
	drivertest.FuzzURL(f, parseURL, func(t *testing.T, raw string, cfg *urlConfig) {
		if len(cfg.endpoints) == 0 {
			t.Fatalf("parseURL(%q) accepted no endpoint", raw)
		}
		o := drivertest.Applied(t, defaultOptions(), cfg.opts)
		if !strings.HasPrefix(o.prefix, "/") || strings.HasSuffix(o.prefix, "/") || o.sessionTTL < time.Second {
			t.Fatalf("parseURL(%q): prefix %q, session TTL %v", raw, o.prefix, o.sessionTTL)
		}
	},
		"etcd://h:1", "etcd://u:pw@h1:1,h2:2/p?session_ttl=2s", "etcd://h?tls=true&tls_ca_file=x",
		"etcd://[::1]:7/a/b", "etcd://h:1?dial_timeout=1s&tls_server_name=n", "etcd://h:1/%2F", "etcd://,",
	)
}
