package driverkit

import (
	"net/url"
	"slices"
	"strings"
)

// Redacted replaces a secret in URLs and messages.
const Redacted = "xxxxx"

// Query parameters whose values are secrets: any name containing one of
// secretParts, and the names in secretNames. "key" alone would also hide
// harmless parameters such as key_prefix or tls_key_file (a path).
var (
	secretParts = []string{"password", "passwd", "secret", "token", "credential", "apikey", "api_key", "access_key", "private_key"}
	secretNames = []string{"pass", "pwd", "key", "auth"}
)

// Redact returns rawURL with its password, and the values of query
// parameters that look like secrets, replaced by Redacted. It also works on
// strings that do not parse as URLs, so it is safe for error messages.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || (u.User == nil && strings.Contains(u.Opaque+u.Path, "@")) {
		// Not a URL, or userinfo that url.Parse did not see as such
		// ("redis:u:p@h", "u:p@h", "mem:///u:p@h").
		return redactUnparsed(rawURL)
	}
	changed := false
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Redacted)
			changed = true
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if IsSecretParam(k) {
				q[k] = []string{Redacted}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	if !changed {
		return rawURL
	}
	return u.String()
}

// redactUnparsed hides, in a string that is not a valid URL, everything
// between the first ':' after the scheme and the last '@' (the password may
// contain unescaped / ? #), and every query value after that.
func redactUnparsed(s string) string {
	start := strings.Index(s, "://")
	if start < 0 {
		start = 0
	} else {
		start += 3
	}
	rest := start
	if at := strings.LastIndex(s[start:], "@"); at >= 0 {
		at += start
		if c := strings.Index(s[start:at], ":"); c >= 0 {
			s = s[:start+c+1] + Redacted + s[at:]
			rest = start + c + 1 + len(Redacted)
		}
	}
	if i := strings.IndexAny(s[rest:], "?#"); i >= 0 {
		s = s[:rest+i] + "?" + Redacted
	}
	return s
}

// IsSecretParam reports whether the query parameter k holds a secret.
func IsSecretParam(k string) bool {
	k = strings.ToLower(k)
	for _, p := range secretParts {
		if strings.Contains(k, p) {
			return true
		}
	}
	return slices.Contains(secretNames, k)
}

// Secrets returns the forms in which u's password and secret query values
// can appear in a message: as given, as written in a URL's userinfo, path
// or query, and as written in u's raw query.
func Secrets(u *url.URL) []string {
	var secrets []string
	if u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			userinfo := strings.TrimPrefix(url.UserPassword("", p).String(), ":")
			secrets = append(secrets, p, userinfo, url.QueryEscape(p), url.PathEscape(p))
		}
	}
	// Query values as written (u.String() repeats RawQuery), not only decoded.
	for _, kv := range strings.Split(u.RawQuery, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if v != "" && IsSecretParam(k) {
			secrets = append(secrets, v)
		}
	}
	for k, vs := range u.Query() {
		if IsSecretParam(k) {
			for _, v := range vs {
				if v != "" {
					secrets = append(secrets, v)
				}
			}
		}
	}
	// Longest first, so that a secret that contains another is replaced
	// whole.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(secrets)
}

// Scrub hides u's password, and its secret query values, in whatever form
// they appear in err's message. errors.Is and errors.As still see err.
func Scrub(err error, u *url.URL) error {
	if err == nil || u == nil {
		return err
	}
	return ScrubSecrets(err, Secrets(u))
}

// ScrubSecrets hides each of secrets wherever it appears in err's message.
func ScrubSecrets(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			return &scrubbedError{err: err, secrets: secrets}
		}
	}
	return err
}

type scrubbedError struct {
	err     error
	secrets []string
}

func (e *scrubbedError) Error() string {
	s := e.err.Error()
	for _, p := range e.secrets {
		s = strings.ReplaceAll(s, p, Redacted)
	}
	return s
}

func (e *scrubbedError) Unwrap() error { return e.err }
