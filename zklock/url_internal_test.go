package zklock

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
	"github.com/golocker/locker/internal/drivertest"
)

// parsed is what a test compares of a URL: its config and the options its
// parameters set.
type parsed struct {
	servers            []string
	username, password string
	prefix             string
	sessionTimeout     time.Duration
	connectTimeout     time.Duration
}

func parse(t *testing.T, raw string) (parsed, error) {
	t.Helper()
	cfg, err := parseURL(drivertest.URL(t, raw))
	if err != nil {
		return parsed{}, err
	}
	o := drivertest.Applied(t, defaultOptions(), cfg.opts)
	return parsed{
		servers: cfg.servers, username: cfg.username, password: cfg.password,
		prefix: o.prefix, sessionTimeout: o.sessionTimeout, connectTimeout: o.connectTimeout,
	}, nil
}

func TestParseURL(t *testing.T) {
	drivertest.HostsURLs(t, Scheme, DefaultPort, parseURL, func(cfg *urlConfig) driverkit.HostsURL {
		return driverkit.HostsURL{Hosts: cfg.servers, Username: cfg.username, Password: cfg.password}
	})
	for _, tc := range []struct {
		url  string
		want parsed
	}{
		{"zk://localhost", parsed{servers: []string{"localhost:2181"}}},
		{"zk://[::1]:7/locks", parsed{servers: []string{"[::1]:7"}, prefix: "/locks"}},
		{"zk://h:1/a/b/", parsed{servers: []string{"h:1"}, prefix: "/a/b"}},
		{"zk://h:1/sp%20ace", parsed{servers: []string{"h:1"}, prefix: "/sp ace"}},
		{"zk://h:1?session_timeout=4s&connect_timeout=250ms", parsed{servers: []string{"h:1"}, sessionTimeout: 4 * time.Second, connectTimeout: 250 * time.Millisecond}},
		{"zk://h:1?session_timeout=1500ms", parsed{servers: []string{"h:1"}, sessionTimeout: 1500 * time.Millisecond}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			got, err := parse(t, tc.url)
			if err != nil {
				t.Fatalf("parseURL: %v", err)
			}
			want := tc.want
			if want.prefix == "" {
				want.prefix = DefaultPrefix
			}
			if want.sessionTimeout == 0 {
				want.sessionTimeout = DefaultSessionTimeout
			}
			if want.connectTimeout == 0 {
				want.connectTimeout = DefaultConnectTimeout
			}
			if !slices.Equal(got.servers, want.servers) || got.username != want.username || got.password != want.password ||
				got.prefix != want.prefix || got.sessionTimeout != want.sessionTimeout || got.connectTimeout != want.connectTimeout {
				t.Errorf("parseURL = %+v\nwant       %+v", got, want)
			}
		})
	}
}

func TestParseURLErrors(t *testing.T) {
	drivertest.HostsURLErrors(t, Scheme, parseURL)
	drivertest.BadURLs(t, parseURL, map[string]string{
		"zk://h:1/a//b":            "empty, . or .. segment",
		"zk://h:1/a/./b":           "empty, . or .. segment",
		"zk://h:1/zookeeper":       "ZooKeeper's own",
		"zk://h:1/zookeeper/quota": "ZooKeeper's own",
		"zk://h:1/a%01b":           "does not allow",
		"zk://h:1?chroot=/x":       `unknown parameter "chroot"`,
		"zk://h:1?session_timeout=1s&session_timeout=2s": "given 2 times",
		"zk://h:1?session_timeout=10":                    "bad session_timeout",
		"zk://h:1?session_timeout=1ms":                   "below 200ms",
		"zk://h:1?session_timeout=100ms":                 "below 200ms, less than ZooKeeper servers grant",
		"zk://h:1?session_timeout=-5s":                   "below 200ms",
		"zk://h:1?connect_timeout=0s":                    "bad connect_timeout",
	}, "secret")
}

// TestOpenErrorsHideThePassword opens URLs that fail after parsing and
// checks that the password appears in no error, through Open and through
// locker.Open.
func TestOpenErrorsHideThePassword(t *testing.T) {
	drivertest.OpenFailures(t, "Pa55-w0rd", 30*time.Second, Open,
		"zk://u:Pa55-w0rd@127.0.0.1:1?connect_timeout=300ms",
		"zk://u:Pa55-w0rd@h:1/a//b",
		"zk://u:Pa55-w0rd@127.0.0.1:1?%zz",
	)
}

func TestOptions(t *testing.T) {
	drivertest.BadOptions(t, defaultOptions,
		drivertest.BadOption[Option]{Name: "session timeout too short", Opt: WithSessionTimeout(time.Millisecond), Want: "at least 10ms"},
		drivertest.BadOption[Option]{Name: "prefix without a slash", Opt: WithPrefix("locks"), Want: "must begin with '/'"},
		drivertest.BadOption[Option]{Name: "prefix under /zookeeper", Opt: WithPrefix("/zookeeper/x"), Want: "ZooKeeper's own"},
		drivertest.BadOption[Option]{Name: "empty ACL", Opt: WithACL(nil), Want: "empty ACL"},
		drivertest.BadOption[Option]{Name: "zero connect timeout", Opt: WithConnectTimeout(0), Want: "must be positive"},
	)
	if _, err := New(nil, WithSessionTimeout(time.Second)); err == nil {
		t.Error("New(nil) succeeded")
	}
}

func TestEscape(t *testing.T) {
	for _, s := range []string{"a", ".", "..", "...", "a.b", "a/b", "%", "%2F", "ünï/cødé%25", "//", "emoji-🔒", "ctl-\x01\x1f\x7f\u0085", "priv-\ue000", "\ufff0\uffff", "zookeeper"} {
		checkEscape(t, s)
	}
	for _, bad := range []string{"%", "%2", "%zz", "%FF"} {
		if _, ok := unescape(bad); ok {
			t.Errorf("unescape(%q) succeeded", bad)
		}
	}
}

func TestLockNodes(t *testing.T) {
	got := lockNodes([]string{
		"_c_b-lock-0000000010", "stray", "_c_a-lock-0000000002", "_c_c-lock-x", "x-lock-0000000001", "_c_d-lock-0000000003",
	})
	var names []string
	for _, n := range got {
		names = append(names, n.name)
	}
	if want := []string{"_c_a-lock-0000000002", "_c_d-lock-0000000003", "_c_b-lock-0000000010"}; !slices.Equal(names, want) {
		t.Errorf("lockNodes = %v, want %v", names, want)
	}
}

// FuzzParseURL checks that no URL makes the parser panic, that every error
// wraps ErrBadURL and hides the password, and that what it accepts is
// usable.
func FuzzParseURL(f *testing.F) {
	drivertest.FuzzURL(f, parseURL, func(t *testing.T, raw string, cfg *urlConfig) {
		if len(cfg.servers) == 0 {
			t.Fatalf("parseURL(%q) accepted no server", raw)
		}
		o := drivertest.Applied(t, defaultOptions(), cfg.opts)
		if p, err := cleanPrefix(o.prefix); err != nil || p != o.prefix {
			t.Fatalf("parseURL(%q) accepted prefix %q: %v", raw, o.prefix, err)
		}
	},
		"zk://h:1", "zk://u:pw@h1:1,h2:2/p?session_timeout=2s", "zk://[::1]:7/a/b",
		"zk://h:1?connect_timeout=1s", "zk://h:1/%2E", "zk://,", "zk://h/zookeeper",
	)
}

// FuzzEscape checks that every lock name becomes a node name without the
// characters ZooKeeper refuses (TestNamesZooKeeperRefuses checks those
// against a server) that maps back to it.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"a", ".", "..", "a/b", "%41", "🔒", "\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if name == "" || !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
			return // package locker refuses these
		}
		checkEscape(t, name)
	})
}

// checkEscape checks that escape makes of name a node name without the
// characters ZooKeeper refuses, and that unescape maps it back.
func checkEscape(t *testing.T, name string) {
	t.Helper()
	e := escape(name)
	if e == "." || e == ".." || strings.Contains(e, "/") {
		t.Errorf("escape(%q) = %q, not a node name", name, e)
	}
	for _, r := range e {
		if forbidden(r) {
			t.Errorf("escape(%q) = %q keeps %U", name, e, r)
		}
	}
	if got, ok := unescape(e); !ok || got != name {
		t.Errorf("unescape(escape(%q)) = %q, %v", name, got, ok)
	}
}

func TestCheckGranted(t *testing.T) {
	asked := func(d time.Duration) options {
		o := defaultOptions()
		if err := WithSessionTimeout(d)(&o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	for _, tc := range []struct {
		name    string
		o       options
		granted int64 // ms
		want    string
	}{
		{"granted as asked", asked(4 * time.Second), 4000, ""},
		{"granted less (the servers' maximum)", asked(60 * time.Second), 40000, ""},
		{"not known", asked(300 * time.Millisecond), 0, ""},
		{"the default, raised", defaultOptions(), 12000, ""},
		{"raised above an explicit ask", asked(300 * time.Millisecond), 400, "session timeout 300ms: the ensemble granted 400ms, its least (its servers' minSessionTimeout, 2 ticks by default); ask for 400ms or more"},
	} {
		err := checkGranted(tc.o, tc.granted)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want nil", tc.name, err)
		case tc.want != "" && (!errors.Is(err, backend.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrInvalidOption saying %q", tc.name, err, tc.want)
		}
	}
}
