package driverkit_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/golocker/locker/internal/driverkit"
)

func TestScrub(t *testing.T) {
	cases := []struct {
		url    string
		secret string // must not appear
		err    string // the error's message before scrubbing, with %s for the form of the secret
		form   func(p string) string
	}{
		{"mysql://u:p%2Fss@h/db", "p/ss", "dial: bad password %s", func(p string) string { return p }},
		{"mysql://u:p%2Fss@h/db", "p/ss", "dsn u:%s@tcp(h)/db", url.PathEscape},
		{"mysql://u:p%2Fss@h/db", "p/ss", "dsn u:%s@tcp(h)/db", url.QueryEscape},
		// The path-escaped form alone (the leak that mysqllock's own copy
		// of this function let through).
		{"postgres://u:a%20b%3Fc@h/db", "a b?c", "connect to postgres://u:%s@h/db failed", url.PathEscape},
		{"redis://h?password=s3cr3t", "s3cr3t", "AUTH %s failed", func(p string) string { return p }},
	}
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			u, err := url.Parse(c.url)
			if err != nil {
				t.Fatal(err)
			}
			base := fmt.Errorf(c.err, c.form(c.secret))
			got := driverkit.Scrub(base, u)
			if strings.Contains(got.Error(), c.form(c.secret)) || strings.Contains(got.Error(), c.secret) {
				t.Errorf("Scrub = %q: the secret %q is in it", got, c.secret)
			}
			if !errors.Is(got, base) {
				t.Error("Scrub hides the error from errors.Is")
			}
		})
	}
}

func FuzzScrub(f *testing.F) {
	f.Add("p/ss w?rd", "error with %s in it")
	f.Add("s3cr3t", "%s")
	f.Fuzz(func(t *testing.T, password, format string) {
		if len(password) < 4 || strings.Contains(driverkit.Redacted, password) || strings.Count(format, "%s") != 1 || strings.Contains(format, "%!") {
			t.Skip()
		}
		u := &url.URL{Scheme: "mysql", User: url.UserPassword("u", password), Host: "h", Path: "/db"}
		for _, form := range []string{password, url.PathEscape(password), url.QueryEscape(password), u.User.String()} {
			msg := strings.Replace(format, "%s", form, 1)
			got := driverkit.Scrub(errors.New(msg), u).Error()
			// What remains of the message may contain the secret only
			// where the format itself spelled it.
			if strings.Contains(got, password) && !strings.Contains(strings.Replace(format, "%s", "", 1), password) {
				t.Fatalf("Scrub(%q) = %q: the password %q survived", msg, got, password)
			}
		}
	})
}

func TestEscape(t *testing.T) {
	for _, name := range []string{"", "plain", "a{b}c", "%", "%25", "{}{}%", "ünï{code}"} {
		e := driverkit.Escape(name, "{}")
		if strings.ContainsAny(e, "{}") {
			t.Errorf("Escape(%q) = %q: special bytes left", name, e)
		}
		back, ok := driverkit.Unescape(e, "{}")
		if !ok || back != name {
			t.Errorf("Unescape(Escape(%q)) = %q, %v", name, back, ok)
		}
	}
	for _, bad := range []string{"%", "%2", "%zz", "%41", "%7b"} {
		if _, ok := driverkit.Unescape(bad, "{}"); ok {
			t.Errorf("Unescape(%q) accepted an escape Escape does not write", bad)
		}
	}
}

// TestOpenHidesThePasswordInTheDriversError: a store client that repeats
// the password it was given in its error does not leak it through Open,
// and the error still matches what it wraps.
func TestOpenHidesThePasswordInTheDriversError(t *testing.T) {
	const secret = "s3cr/t pw"
	raw := "store://app:" + url.PathEscape(secret) + "@db.example:1234/x"
	cause := errors.New("refused")
	_, err := driverkit.Open("storelock", raw, func(u *url.URL) (int, error) {
		pw, _ := u.User.Password()
		return 0, fmt.Errorf("dial %s with password %s: %w", u.Host, pw, cause)
	})
	if err == nil {
		t.Fatal("Open succeeded")
	}
	msg := err.Error()
	if strings.Contains(msg, secret) || strings.Contains(msg, url.PathEscape(secret)) {
		t.Errorf("Open's error shows the password: %s", msg)
	}
	if !strings.Contains(msg, "db.example:1234") || !errors.Is(err, cause) {
		t.Errorf("Open's error = %q, want it to name the host and wrap its cause", msg)
	}
}
