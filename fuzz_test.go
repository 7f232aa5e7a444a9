package locker_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/locallock"
)

var urlSeeds = []string{
	"",
	"mem://",
	"mem://ns",
	"mem://NS",
	"mem:",
	"mem:ns",
	"mem:///",
	"mem://ns/p",
	"mem://ns:1",
	"mem://u@ns",
	"mem://u:s3cret@ns",
	"mem://?password=s3cret",
	"mem://ns#frag",
	"redis://user:s3cret@host:6379/0",
	"redis://:s3cret@host?db=1",
	"rediss://u:p%40ss@h1,h2/0?password=x",
	"x://u:s3cret@ho st/%zz",
	"x://u:s3cret/p@host",
	"echo-test://u:s3cret@h",
	"echo-test://u:pa%20ss@h?token=t0k3n",
	"etcd://h1:2379,h2:2379/prefix",
	"sqlite:///tmp/x.db?_auth_pass=abcd",
	"://nohost",
	"127.0.0.1:6379",
	"\x00mem://",
}

// userPassword returns the password of s and the URL without it, if s
// parses as a URL whose password is long enough to be told apart from
// other text.
func userPassword(s string) (pw string, without *url.URL, ok bool) {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return "", nil, false
	}
	pw, has := u.User.Password()
	if !has || len(pw) < 4 {
		return "", nil, false
	}
	v := *u
	v.User = url.User(u.User.Username())
	return pw, &v, true
}

// passwordForms are the ways a password can be written in a message: as
// it is, and escaped as url.URL.String writes it.
func passwordForms(pw string) []string {
	return []string{pw, strings.TrimPrefix(url.UserPassword("", pw).String(), ":")}
}

// FuzzRedact: Redact never panics and hides the password of any URL that
// has one, unless the same text also occurs elsewhere in the URL.
func FuzzRedact(f *testing.F) {
	for _, s := range urlSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := locker.Redact(s)
		pw, without, ok := userPassword(s)
		if !ok {
			return
		}
		elsewhere := locker.Redact(without.String())
		for _, form := range passwordForms(pw) {
			if strings.Contains(out, form) && !strings.Contains(elsewhere, form) && !strings.Contains("xxxxx", form) {
				t.Errorf("Redact(%q) = %q: shows the password %q", s, out, form)
			}
		}
	})
}

// FuzzOpen: Open never panics; its errors never show the password of a
// URL that parses; a mem URL opens or is ErrBadURL.
func FuzzOpen(f *testing.F) {
	for _, s := range urlSeeds {
		f.Add(s)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, s string) {
		c, err := locker.Open(ctx, s)
		if err == nil {
			if err := c.Close(); err != nil {
				t.Errorf("Close of a Client from Open(%q): %v", s, err)
			}
		}
		if u, perr := url.Parse(s); perr == nil && u.Scheme == locallock.Scheme && err != nil && !errors.Is(err, locker.ErrBadURL) {
			t.Errorf("Open(%q) = %v, want a Client or ErrBadURL", s, err)
		}
		if err == nil {
			return
		}
		pw, without, ok := userPassword(s)
		if !ok {
			return
		}
		// Text that the same URL without its password also yields (a
		// scheme, a host, the message itself) is not the password showing.
		elsewhere := locker.Redact(without.String())
		if c2, err2 := locker.Open(ctx, without.String()); err2 != nil {
			elsewhere += " " + err2.Error()
		} else {
			_ = c2.Close()
		}
		for _, form := range passwordForms(pw) {
			if strings.Contains(err.Error(), form) && !strings.Contains(elsewhere, form) && !strings.Contains("xxxxx", form) {
				t.Errorf("Open(%q) = %q: shows the password %q", s, err, form)
			}
		}
	})
}

// FuzzNames: any name either works as a lock or is ErrInvalidName, exactly
// when package locker's documented rules say so; nothing panics.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"orders/42", "", "a", "\x00", "nul\x00byte", "bad\xffutf8", "日本語", "{tag}", "a b", strings.Repeat("n", backend.MaxNameLen), strings.Repeat("n", backend.MaxNameLen+1), "é" + strings.Repeat("n", backend.MaxNameLen-1)} {
		f.Add(s)
	}
	c, err := locker.New(locallock.New(nil))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, name string) {
		valid := name != "" && len(name) <= backend.MaxNameLen && utf8.ValidString(name) && !strings.Contains(name, "\x00")
		m := c.NewMutex(name)
		ok, err := m.TryLock(ctx)
		switch {
		case valid && (!ok || err != nil):
			t.Fatalf("TryLock(%q) = %v, %v; want true, nil", name, ok, err)
		case !valid && (ok || !errors.Is(err, locker.ErrInvalidName)):
			t.Fatalf("TryLock(%q) = %v, %v; want false, ErrInvalidName", name, ok, err)
		case ok:
			if err := m.Unlock(ctx); err != nil {
				t.Fatalf("Unlock(%q): %v", name, err)
			}
		}
	})
}
