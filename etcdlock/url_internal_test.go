package etcdlock

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

// parsed is what a test compares of a URL: its config and the options its
// parameters set.
type parsed struct {
	endpoints          []string
	username, password string
	tls                *tlsParams
	prefix             string
	sessionTTL         time.Duration
	dialTimeout        time.Duration
}

func parse(t *testing.T, raw string) (parsed, error) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("url.Parse(%q): %v", raw, err)
	}
	cfg, err := parseURL(u)
	if err != nil {
		return parsed{}, err
	}
	o := defaultOptions()
	if err := o.apply(cfg.opts); err != nil {
		t.Fatalf("the URL's options: %v", err)
	}
	return parsed{
		endpoints: cfg.endpoints, username: cfg.username, password: cfg.password, tls: cfg.tls,
		prefix: o.prefix, sessionTTL: o.sessionTTL, dialTimeout: o.dialTimeout,
	}, nil
}

func TestParseURL(t *testing.T) {
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
		{"etcd://127.0.0.1:2379", parsed{endpoints: []string{"127.0.0.1:2379"}}},
		{"etcd://localhost", parsed{endpoints: []string{"localhost:2379"}}},
		{"ETCD://h1:1,h2:2,h3:3/", parsed{endpoints: []string{"h1:1", "h2:2", "h3:3"}}},
		{"etcd://h1,h2:2", parsed{endpoints: []string{"h1:2379", "h2:2"}}},
		{"etcd://[::1]:7/locks", parsed{endpoints: []string{"[::1]:7"}, prefix: "/locks"}},
		{"etcd://h:1/a/b/", parsed{endpoints: []string{"h:1"}, prefix: "/a/b"}},
		{"etcd://h:1/sp%20ace", parsed{endpoints: []string{"h:1"}, prefix: "/sp ace"}},
		{"etcd://u:p%40ss@h:1", parsed{endpoints: []string{"h:1"}, username: "u", password: "p@ss"}},
		{"etcd://u@h:1", parsed{endpoints: []string{"h:1"}, username: "u"}},
		{
			"etcd://h:1?session_ttl=3s&dial_timeout=250ms",
			parsed{endpoints: []string{"h:1"}, sessionTTL: 3 * time.Second, dialTimeout: 250 * time.Millisecond},
		},
		{"etcd://h:1?session_ttl=1m", parsed{endpoints: []string{"h:1"}, sessionTTL: time.Minute}},
		{"etcd://h:1?tls=true", parsed{endpoints: []string{"h:1"}, tls: &tlsParams{}}},
		{"etcd://h:1?tls=false", parsed{endpoints: []string{"h:1"}}},
		{
			"etcd://h:1?tls_ca_file=/ca.pem&tls_cert_file=/c.pem&tls_key_file=/k.pem&tls_server_name=etcd&tls_insecure_skip_verify=1",
			parsed{endpoints: []string{"h:1"}, tls: &tlsParams{caFile: "/ca.pem", certFile: "/c.pem", keyFile: "/k.pem", serverName: "etcd", insecureSkipVerify: true}},
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
	for _, tc := range []struct{ url, want string }{
		{"redis://h:1", "want etcd://"},
		{"etcd:h:1", "want etcd://"},
		{"etcd://", "no host"},
		{"etcd:///locks", "no host"},
		{"etcd://h:1#frag", "fragment"},
		{"etcd://h:0", "bad port"},
		{"etcd://h:99999", "bad port"},
		{"etcd://h:1,,h:2", "empty host"},
		{"etcd://:1", "empty host name"},
		{"etcd://h:1,h:1", "given twice"},
		{"etcd://:secret@h:1", "password without a user name"},
		{"etcd://h:1/a//b", "empty segment"},
		{"etcd://h:1?prefix=x", `unknown parameter "prefix"`},
		{"etcd://h:1?sessionttl=1s", `unknown parameter "sessionttl"`},
		{"etcd://h:1?session_ttl=1s&session_ttl=2s", "given 2 times"},
		{"etcd://h:1?session_ttl=1500ms", "whole number of seconds"},
		{"etcd://h:1?session_ttl=0s", "whole number of seconds"},
		{"etcd://h:1?session_ttl=10", "bad session_ttl"},
		{"etcd://h:1?dial_timeout=-1s", "bad dial_timeout"},
		{"etcd://h:1?tls=maybe", "bad tls"},
		{"etcd://h:1?tls=false&tls_ca_file=x", "tls=false with tls_ parameters"},
		{"etcd://h:1?tls_cert_file=c", "go together"},
		{"etcd://h:1?tls_insecure_skip_verify=x", "bad tls_insecure_skip_verify"},
		{"etcd://h:1?a=%zz", "bad query"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := parse(t, tc.url)
			if err == nil {
				t.Fatal("parseURL succeeded")
			}
			if !errors.Is(err, backend.ErrBadURL) {
				t.Errorf("error %v does not wrap ErrBadURL", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// TestOpenErrorsHideThePassword opens URLs that fail after parsing (a TLS
// file that is missing, nothing listening) and checks that the password
// appears in no error, through Open and through locker.Open.
func TestOpenErrorsHideThePassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, raw := range []string{
		"etcd://u:Pa55-w0rd@127.0.0.1:1?dial_timeout=200ms",
		"etcd://u:Pa55-w0rd@127.0.0.1:1?tls_ca_file=/nonexistent/ca.pem",
		"etcd://u:Pa55-w0rd@h:1/a//b",
		"etcd://u:Pa55-w0rd@127.0.0.1:1?%zz",
	} {
		_, err := Open(ctx, raw)
		if err == nil {
			t.Fatalf("Open(%s) succeeded", raw)
		}
		if strings.Contains(err.Error(), "Pa55-w0rd") {
			t.Errorf("Open error shows the password: %v", err)
		}
		_, err = locker.Open(ctx, raw)
		if err == nil {
			t.Fatalf("locker.Open(%s) succeeded", raw)
		}
		if strings.Contains(err.Error(), "Pa55-w0rd") {
			t.Errorf("locker.Open error shows the password: %v", err)
		}
	}
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Option
		want string
	}{
		{"session TTL below a second", WithSessionTTL(500 * time.Millisecond), "whole number of seconds"},
		{"session TTL not whole seconds", WithSessionTTL(1500 * time.Millisecond), "whole number of seconds"},
		{"prefix without a slash", WithPrefix("locks"), "does not start with '/'"},
		{"prefix with a trailing slash", WithPrefix("/locks/"), "ends with '/'"},
		{"nil TLS config", WithTLSConfig(nil), "nil TLS config"},
		{"zero dial timeout", WithDialTimeout(0), "must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultOptions()
			err := o.apply([]Option{tc.opt})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("apply = %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
}

func TestEscape(t *testing.T) {
	for _, s := range []string{"", "a", "a/b", "%", "%2F", "a%/b/", "ünï/cødé%25", "//"} {
		e := escape(s)
		if strings.Contains(e, "/") {
			t.Errorf("escape(%q) = %q contains '/'", s, e)
		}
		if got, ok := unescape(e); !ok || got != s {
			t.Errorf("unescape(escape(%q)) = %q, %v", s, got, ok)
		}
	}
	// Prefixes map to prefixes, and only they do.
	if !strings.HasPrefix(escape("a/b%c"), escape("a/b%")) || strings.HasPrefix(escape("a%"), escape("a/")) {
		t.Error("escape does not preserve prefixes")
	}
	for _, bad := range []string{"%", "%2", "%zz", "%41"} {
		if _, ok := unescape(bad); ok {
			t.Errorf("unescape(%q) succeeded", bad)
		}
	}
}

// FuzzParseURL checks that no URL makes the parser panic, that every error
// wraps ErrBadURL and hides the password, and that what it accepts is
// usable.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"etcd://h:1", "etcd://u:pw@h1:1,h2:2/p?session_ttl=2s", "etcd://h?tls=true&tls_ca_file=x",
		"etcd://[::1]:7/a/b", "etcd://h:1?dial_timeout=1s&tls_server_name=n", "etcd://h:1/%2F", "etcd://,",
	} {
		f.Add(s)
	}
	const secret = "S3cr3t-Pw"
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		if u.User != nil {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), secret)
			}
		}
		cfg, err := parseURL(u)
		if err != nil {
			if !errors.Is(err, backend.ErrBadURL) {
				t.Fatalf("parseURL(%q): %v does not wrap ErrBadURL", u, err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("parseURL(%q): %v shows the password", u, err)
			}
			return
		}
		if len(cfg.endpoints) == 0 {
			t.Fatalf("parseURL(%q) accepted no endpoint", u)
		}
		o := defaultOptions()
		if err := o.apply(cfg.opts); err != nil {
			t.Fatalf("parseURL(%q) accepted options that do not apply: %v", u, err)
		}
		if !strings.HasPrefix(o.prefix, "/") || strings.HasSuffix(o.prefix, "/") || o.sessionTTL < time.Second {
			t.Fatalf("parseURL(%q): prefix %q, session TTL %v", u, o.prefix, o.sessionTTL)
		}
	})
}
