package locker

import (
	"net/url"

	"github.com/golocker/locker/internal/driverkit"
)

// Redact returns rawURL with its password, and the values of query
// parameters that look like secrets, replaced by "xxxxx". It also works on
// strings that do not parse as URLs, so it is safe for error messages.
func Redact(rawURL string) string { return driverkit.Redact(rawURL) }

// scrub hides the password of u, and secret query values, wherever they
// appear in err's message. errors.Is and errors.As still see err.
func scrub(err error, u *url.URL) error { return driverkit.Scrub(err, u) }
