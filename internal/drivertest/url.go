package drivertest

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
	"github.com/golocker/locker/internal/driverkit"
)

// Secret is the password FuzzURL puts in the URLs it parses.
const Secret = "S3cr3t-Pw"

// BadURLs runs BadURL with the driver's parser on each URL of cases, in a
// subtest of its own; a case's value is what the error must say ("" for
// anything).
func BadURLs[C any](t *testing.T, parse func(*url.URL) (C, error), cases map[string]string, secrets ...string) {
	t.Helper()
	parseOnly := func(u *url.URL) error {
		_, err := parse(u)
		return err
	}
	for raw, want := range cases {
		t.Run(raw, func(t *testing.T) { BadURL(t, raw, want, parseOnly, secrets...) })
	}
}

// BadURL parses raw, a URL the driver must refuse, with parse, and fails t
// unless the error wraps backend.ErrBadURL, says want and shows none of
// secrets.
func BadURL(t *testing.T, raw, want string, parse func(*url.URL) error, secrets ...string) {
	t.Helper()
	err := parse(URL(t, raw))
	if err == nil {
		t.Fatalf("parseURL(%q) succeeded, want an error saying %q", raw, want)
	}
	if !errors.Is(err, backend.ErrBadURL) {
		t.Errorf("parseURL(%q) = %v, does not wrap ErrBadURL", raw, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("parseURL(%q) = %q, does not say %q", raw, err, want)
	}
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Errorf("parseURL(%q) = %q, shows the password", raw, err)
		}
	}
}

// URL parses raw, or fails t.
func URL(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("url.Parse(%q): %v", raw, err)
	}
	return u
}

// FuzzURL fuzzes a driver's URL parser from seeds: each input, with its
// password (if it has one) replaced by Secret, goes to parse, which must
// not panic, and whose error must wrap backend.ErrBadURL and not show the
// password. What parse accepts goes to accepted, to check that it is
// usable.
func FuzzURL[C any](f *testing.F, parse func(*url.URL) (C, error), accepted func(t *testing.T, raw string, c C), seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		if u.User != nil {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), Secret)
			}
		}
		c, err := parse(u)
		if err != nil {
			if !errors.Is(err, backend.ErrBadURL) {
				t.Fatalf("parseURL(%q): %v does not wrap ErrBadURL", u, err)
			}
			if strings.Contains(err.Error(), Secret) {
				t.Fatalf("parseURL(%q): %v shows the password", u, err)
			}
			return
		}
		if accepted != nil {
			accepted(t, raw, c)
		}
	})
}

// OpenFailures runs OpenFails on each of raws, each given timeout, with
// the driver's Open.
func OpenFailures[D backend.Driver, O any](t *testing.T, pw string, timeout time.Duration, open func(context.Context, string, ...O) (D, error), raws ...string) {
	t.Helper()
	for _, raw := range raws {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		OpenFails(t, ctx, raw, pw, open)
		cancel()
	}
}

// BadOption is a case of BadOptions: an option the driver must refuse.
type BadOption[O any] struct {
	Name string // names the subtest
	Opt  O
	Want string // what the error says
}

// BadOptions applies each option of cases to the driver's default options,
// in a subtest of its own, and fails it unless the option is refused with
// an error that matches locker.ErrInvalidOption and says the case's Want.
func BadOptions[T any, O ~func(*T) error](t *testing.T, defaults func() T, cases ...BadOption[O]) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			o := defaults()
			err := driverkit.Apply(&o, []O{c.Opt})
			if err == nil || !strings.Contains(err.Error(), c.Want) {
				t.Errorf("apply = %v, want an error saying %q", err, c.Want)
			} else if !errors.Is(err, locker.ErrInvalidOption) {
				t.Errorf("apply = %v, does not match ErrInvalidOption", err)
			}
		})
	}
}

// Applied returns o with opts applied, the options a URL's parameters set,
// and fails t if one does not apply: a parser must not accept what the
// options refuse.
func Applied[T any, O ~func(*T) error](t testing.TB, o T, opts []O) T {
	t.Helper()
	if err := driverkit.Apply(&o, opts); err != nil {
		t.Fatalf("the URL's options do not apply: %v", err)
	}
	return o
}

// OpenFails opens raw, a URL with the password pw that must fail to open
// (a bad parameter, a missing file, nothing listening), through the
// driver's open and through locker.Open, and fails t if either succeeds or
// shows pw in its error.
func OpenFails[D backend.Driver, O any](t *testing.T, ctx context.Context, raw, pw string, open func(context.Context, string, ...O) (D, error)) {
	t.Helper()
	if d, err := open(ctx, raw); err == nil {
		_ = d.Close()
		t.Errorf("Open(%s) succeeded", locker.Redact(raw))
	} else if strings.Contains(err.Error(), pw) {
		t.Errorf("Open(%s) error shows the password: %v", locker.Redact(raw), err)
	}
	if c, err := locker.Open(ctx, raw); err == nil {
		_ = c.Close()
		t.Errorf("locker.Open(%s) succeeded", locker.Redact(raw))
	} else if strings.Contains(err.Error(), pw) {
		t.Errorf("locker.Open(%s) error shows the password: %v", locker.Redact(raw), err)
	}
}

// HostsURLErrors checks, with BadURLs, that the parser of a driver whose
// URLs are driverkit.ParseHostsURL's,
//
//	scheme://[user:password@]host1[:port][,host2[:port]...][/path][?query]
//
// refuses what every such parser refuses (another scheme, no host, a bad
// port or host list, a password alone, a fragment, an unknown or
// malformed parameter) and says why.
func HostsURLErrors[C any](t *testing.T, scheme string, parse func(*url.URL) (C, error)) {
	t.Helper()
	want := "want " + scheme + "://"
	BadURLs(t, parse, map[string]string{
		"other://h:1":              want,
		scheme + ":h:1":            want,
		scheme + "://":             "no host",
		scheme + ":///locks":       "no host",
		scheme + "://h:1#frag":     "fragment",
		scheme + "://h:0":          "bad port",
		scheme + "://h:99999":      "bad port",
		scheme + "://h:1,,h:2":     "empty host",
		scheme + "://:1":           "empty host name",
		scheme + "://h:1,h:1":      "given twice",
		scheme + "://:secret@h:1":  "password without a user name",
		scheme + "://h:1?nosuch=1": `unknown parameter "nosuch"`,
		scheme + "://h:1?a=%zz":    "bad query",
	}, "secret")
}

// HostsURLs checks that the parser of a driver whose URLs are
// driverkit.ParseHostsURL's reads the hosts and credentials of URLs the
// way every such parser does: parts returns them from what parse made.
func HostsURLs[C any](t *testing.T, scheme, defaultPort string, parse func(*url.URL) (C, error), parts func(C) driverkit.HostsURL) {
	t.Helper()
	for raw, want := range map[string]driverkit.HostsURL{
		scheme + "://127.0.0.1:1":                      {Hosts: []string{"127.0.0.1:1"}},
		scheme + "://localhost":                        {Hosts: []string{"localhost:" + defaultPort}},
		strings.ToUpper(scheme) + "://h1:1,h2:2,h3:3/": {Hosts: []string{"h1:1", "h2:2", "h3:3"}},
		scheme + "://h1,h2:2":                          {Hosts: []string{"h1:" + defaultPort, "h2:2"}},
		scheme + "://[::1]:7/locks":                    {Hosts: []string{"[::1]:7"}},
		scheme + "://u:p%40ss@h:1":                     {Hosts: []string{"h:1"}, Username: "u", Password: "p@ss"},
		scheme + "://u@h:1":                            {Hosts: []string{"h:1"}, Username: "u"},
	} {
		t.Run(raw, func(t *testing.T) {
			c, err := parse(URL(t, raw))
			if err != nil {
				t.Fatalf("parseURL: %v", err)
			}
			got := parts(c)
			if !slices.Equal(got.Hosts, want.Hosts) || got.Username != want.Username || got.Password != want.Password {
				t.Errorf("parseURL = hosts %v, user %q, password %q; want %v, %q, %q", got.Hosts, got.Username, got.Password, want.Hosts, want.Username, want.Password)
			}
		})
	}
}
