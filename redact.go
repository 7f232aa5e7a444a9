package locker

import (
	"net/url"
	"slices"
	"strings"
)

const redacted = "xxxxx"

// Query parameters whose values Redact hides: any name containing one of
// secretParts, and the names in secretNames. "key" alone would also hide
// harmless parameters such as key_prefix or tls_key_file (a path).
var (
	secretParts = []string{"password", "passwd", "secret", "token", "credential", "apikey", "api_key", "access_key", "private_key"}
	secretNames = []string{"pass", "pwd", "key", "auth"}
)

// Redact returns rawURL with its password, and the values of query
// parameters that look like secrets, replaced by "xxxxx". It also works on
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
			u.User = url.UserPassword(u.User.Username(), redacted)
			changed = true
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if isSecretParam(k) {
				q[k] = []string{redacted}
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
			s = s[:start+c+1] + redacted + s[at:]
			rest = start + c + 1 + len(redacted)
		}
	}
	if i := strings.IndexAny(s[rest:], "?#"); i >= 0 {
		s = s[:rest+i] + "?" + redacted
	}
	return s
}

func isSecretParam(k string) bool {
	k = strings.ToLower(k)
	for _, p := range secretParts {
		if strings.Contains(k, p) {
			return true
		}
	}
	return slices.Contains(secretNames, k)
}

// scrub hides the password of u, and secret query values, wherever they
// appear in err's message. errors.Is and errors.As still see err.
func scrub(err error, u *url.URL) error {
	var secrets []string
	if u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			// As written in u.String(), in a query, in a path.
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
		if v != "" && isSecretParam(k) {
			secrets = append(secrets, v)
		}
	}
	for k, vs := range u.Query() {
		if isSecretParam(k) {
			for _, v := range vs {
				if v != "" {
					secrets = append(secrets, v)
				}
			}
		}
	}
	if len(secrets) == 0 {
		return err
	}
	return &scrubbedError{err: err, secrets: secrets}
}

type scrubbedError struct {
	err     error
	secrets []string
}

func (e *scrubbedError) Error() string {
	s := e.err.Error()
	for _, p := range e.secrets {
		s = strings.ReplaceAll(s, p, redacted)
	}
	return s
}

func (e *scrubbedError) Unwrap() error { return e.err }
