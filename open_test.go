package locker_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/locallock" // also registers mem://
)

// echoScheme is a test-only driver whose opener fails with an error that
// repeats the URL it was given, password included, as careless driver code
// (or a client library) might.
const echoScheme = "echo-test"

func init() {
	locker.Register(echoScheme, func(_ context.Context, u *url.URL) (backend.Driver, error) {
		return nil, fmt.Errorf("echo: cannot reach %s", u.String())
	})
}

func TestOpen(t *testing.T) {
	ctx := testCtx(t)

	t.Run("an_unknown_scheme_names_it_and_hints_at_a_forgotten_import", func(t *testing.T) {
		for _, raw := range []string{"x://host", "X://host:1/p?password=s3cret"} {
			c, err := locker.Open(ctx, raw)
			closeIfOpen(c)
			if want := `locker: unknown scheme "x" (forgotten import? registered: echo-test, mem)`; err == nil || err.Error() != want {
				t.Errorf("Open(%q) = %v, want %q", raw, err, want)
			}
			if !errors.Is(err, locker.ErrUnknownScheme) {
				t.Errorf("Open(%q) = %v, want ErrUnknownScheme", raw, err)
			}
		}
	})

	badURLs := []struct{ name, url string }{
		{"an_empty_string", ""},
		{"no_scheme", "//host:6379"},
		{"an_address_without_a_scheme", "127.0.0.1:6379"},
		{"a_bare_word", "redis"},
		{"an_unparsable_URL", "x://ho st/%zz"},
		{"a_missing_scheme_before_the_slashes", "://host"},
		{"mem_with_a_query", "mem://?ttl=1s"},
		{"mem_with_a_path", "mem://ns/path"},
		{"mem_with_a_port", "mem://ns:1234"},
		{"mem_with_a_user", "mem://user@ns"},
		{"mem_with_a_password", "mem://user:pw@ns"},
		{"mem_without_slashes", "mem:ns"},
	}
	for _, tc := range badURLs {
		t.Run(tc.name+"_is_ErrBadURL", func(t *testing.T) {
			c, err := locker.Open(ctx, tc.url)
			closeIfOpen(c)
			if !errors.Is(err, locker.ErrBadURL) {
				t.Errorf("Open(%q) = %v, want ErrBadURL", tc.url, err)
			}
		})
	}

	// secret is what must not appear; for a password cut short by an
	// unescaped reserved character it is the part before that character.
	leaky := []struct{ name, url, secret string }{
		{"a_password_for_an_unregistered_driver", "redis://user:s3cret@host", "s3cret"},
		{"a_password_in_an_unparsable_URL", "x://u:s3cret@ho st/%zz", "s3cret"},
		{"a_secret_query_parameter_mem_rejects", "mem://?password=s3cret", "s3cret"},
		{"a_password_mem_rejects", "mem://u:s3cret@ns", "s3cret"},
		{"a_password_with_an_unescaped_slash", "redis://u:s3cret/x@host:6379", "s3cret"},
		{"a_password_with_an_unescaped_hash", "mem://u:s3cret#x@ns", "s3cret"},
		{"a_password_with_an_unescaped_question_mark", "mem://u:s3cret?x@ns", "s3cret"},
		{"a_password_in_a_URL_without_slashes", "mem:u:s3cret@ns", "s3cret"},
		{"a_password_in_a_URL_with_three_slashes", "mem:///u:s3cret@ns", "s3cret"},
		{"a_password_the_opener_echoes", echoScheme + "://u:s3cret@h", "s3cret"},
	}
	for _, tc := range leaky {
		t.Run(tc.name+"_is_not_in_the_error", func(t *testing.T) {
			c, err := locker.Open(ctx, tc.url)
			closeIfOpen(c)
			if err == nil {
				t.Fatalf("Open(%q) succeeded", tc.url)
			}
			if strings.Contains(err.Error(), tc.secret) {
				t.Errorf("Open(%q) = %q: the error shows the password", tc.url, err)
			}
		})
	}

	// The opener's error repeats u.String(): the password as u.String()
	// escapes it, and a query value as it was written.
	echoed := []struct {
		name, url string
		secrets   []string
	}{
		{"a_plain_password", "//u:s3cret@h", []string{"s3cret"}},
		{"a_plain_secret_parameter", "//h?password=s3cret", []string{"s3cret"}},
		{"a_password_that_needs_escaping", "//u:P%40ssw0rd$@h", []string{"P@ssw0rd$", "P%40ssw0rd$"}},
		{"an_escaped_secret_parameter", "//h?token=abc%2Fdef", []string{"abc/def", "abc%2Fdef"}},
	}
	for _, tc := range echoed {
		t.Run("an_opener_error_echoing_"+tc.name+"_is_scrubbed", func(t *testing.T) {
			raw := echoScheme + ":" + tc.url
			c, err := locker.Open(ctx, raw)
			closeIfOpen(c)
			if err == nil || !strings.Contains(err.Error(), "echo: cannot reach") {
				t.Fatalf("Open(%q) = %v, want the opener's error", raw, err)
			}
			for _, s := range tc.secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("Open(%q) = %q: the error shows %q", raw, err, s)
				}
			}
		})
	}

	t.Run("a_nil_ctx_is_ErrNilContext", func(t *testing.T) {
		var nilCtx context.Context
		if c, err := locker.Open(nilCtx, "mem://"); !errors.Is(err, locker.ErrNilContext) {
			closeIfOpen(c)
			t.Errorf("Open(nil, mem://) = %v, want ErrNilContext", err)
		}
	})
	t.Run("a_bad_option_is_an_error", func(t *testing.T) {
		if c, err := locker.Open(ctx, "mem://", locker.WithTTL(0)); !errors.Is(err, locker.ErrInvalidTTL) {
			closeIfOpen(c)
			t.Errorf("Open with TTL 0 = %v, want ErrInvalidTTL", err)
		}
	})
	t.Run("mem_opens_a_working_client", func(t *testing.T) {
		c, err := locker.Open(ctx, "MEM://open-test")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		m := c.NewMutex("open/works")
		mustLock(t, ctx, m)
		mustUnlock(t, ctx, m)
	})
}

func TestRegister(t *testing.T) {
	noop := func(context.Context, *url.URL) (backend.Driver, error) { return nil, errors.New("unused") }
	panics := []struct {
		name   string
		scheme string
		open   locker.Opener
	}{
		{"a_nil_opener", "register-nil-test", nil},
		{"an_empty_scheme", "", noop},
		{"an_upper_case_scheme", "Register-Upper-Test", noop},
		{"a_scheme_registered_by_a_driver", "mem", noop},
		{"a_scheme_registered_twice", echoScheme, noop},
	}
	for _, tc := range panics {
		t.Run("panics_on_"+tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.HasPrefix(msg, "locker: Register") {
					t.Errorf("Register(%q) recovered %v, want a locker: Register panic", tc.scheme, r)
				}
			}()
			locker.Register(tc.scheme, tc.open)
		})
	}
	t.Run("Schemes_lists_the_registered_drivers_sorted_and_none_that_panicked", func(t *testing.T) {
		s := locker.Schemes()
		if !slices.Contains(s, "mem") || !slices.Contains(s, echoScheme) {
			t.Errorf("Schemes() = %v, want mem and %s", s, echoScheme)
		}
		if !slices.IsSorted(s) {
			t.Errorf("Schemes() = %v, not sorted", s)
		}
		for _, bad := range []string{"register-nil-test", "register-upper-test", "Register-Upper-Test", ""} {
			if slices.Contains(s, bad) {
				t.Errorf("Schemes() = %v, includes %q whose Register panicked", s, bad)
			}
		}
	})
}

// TestInProcessGuard: outside tests, Open refuses the in-process driver
// unless the URL says the program runs as one process; RequireCrossProcess
// refuses it always; New takes it as given.
func TestInProcessGuard(t *testing.T) {
	ctx := testCtx(t)
	defer locker.SetInTest(func() bool { return false })()
	cases := []struct {
		url  string
		opts []locker.Option
		ok   bool
	}{
		{url: "mem://"},
		{url: "mem://ns"},
		{url: "mem://?single_process=false"},
		{url: "mem://?single_process=true", ok: true},
		{url: "mem://ns?single_process=1", ok: true},
		{url: "mem://?single_process=true", opts: []locker.Option{locker.RequireCrossProcess()}},
	}
	for _, tc := range cases {
		c, err := locker.Open(ctx, tc.url, tc.opts...)
		closeIfOpen(c)
		switch {
		case tc.ok && err != nil:
			t.Errorf("Open(%q) = %v, want a Client", tc.url, err)
		case !tc.ok && !errors.Is(err, locker.ErrBadURL):
			t.Errorf("Open(%q) = %v, want ErrBadURL", tc.url, err)
		case !tc.ok && len(tc.opts) == 0 && !strings.Contains(err.Error(), "single_process=true"):
			t.Errorf("Open(%q) = %v: the error does not say how to allow it", tc.url, err)
		}
	}
	c, err := locker.New(locallock.New(nil))
	if err != nil {
		t.Errorf("New(locallock.New(nil)) = %v; code that builds the driver chooses it", err)
	}
	closeIfOpen(c)
}
