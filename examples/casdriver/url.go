package casdriver

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

// Register makes locker.Open open URLs of scheme on s:
//
//	scheme://[?key_prefix=P]
//
// key_prefix puts every record under P+name, so that programs sharing a
// store can keep their locks apart. A driver of a real store registers
// its scheme in init, and its URLs name the store's servers; this toy
// store lives in the program, which names it here. Register panics if the
// scheme is registered already.
func Register(scheme string, s *Store) {
	locker.Register(scheme, func(ctx context.Context, u *url.URL) (backend.Driver, error) {
		prefix, err := parseURL(u)
		if err != nil {
			return nil, err
		}
		return &Driver{s: s, prefix: prefix}, nil
	})
}

// params are the query parameters a URL may have. An unknown one is an
// error, not ignored: a misspelt parameter must not go unnoticed.
var params = []string{"key_prefix"}

// parseURL returns the key prefix the URL sets. Its errors wrap
// backend.ErrBadURL and never quote the URL: package locker names it, with
// any password hidden.
func parseURL(u *url.URL) (prefix string, err error) {
	if u.Opaque != "" || u.User != nil || u.Host != "" || (u.Path != "" && u.Path != "/") || u.Fragment != "" {
		return "", badURL("want %s://[?key_prefix=P]: the store lives in this program", u.Scheme)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", badURL("malformed query")
	}
	for k, vs := range q {
		switch {
		case !slices.Contains(params, k):
			return "", badURL("unknown parameter %q (known: %s)", k, strings.Join(params, ", "))
		case len(vs) != 1:
			return "", badURL("parameter %q given %d times", k, len(vs))
		}
	}
	prefix = q.Get("key_prefix")
	if strings.ContainsRune(prefix, 0) {
		return "", badURL("key_prefix contains a NUL byte")
	}
	return prefix, nil
}

// badURL returns an error that wraps backend.ErrBadURL, with this
// driver's name: "locker: bad URL: casdriver: <detail>", which
// locker.Open shows as "locker: open <URL>: bad URL: casdriver: <detail>".
func badURL(format string, args ...any) error {
	return fmt.Errorf("%w: casdriver: %s", backend.ErrBadURL, fmt.Sprintf(format, args...))
}
