package mongolock

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

// URL schemes of the driver.
const (
	Scheme    = "mongodb"
	SchemeSRV = "mongodb+srv"
)

func init() {
	for _, s := range []string{Scheme, SchemeSRV} {
		locker.Register(s, func(ctx context.Context, u *url.URL) (backend.Driver, error) {
			return openURL(ctx, u, nil)
		})
	}
}

// Open connects a new client to the deployment that rawURL names (see the
// package doc), checks that a primary answers, and returns a Driver whose
// Close disconnects the client. opts apply after the URL's parameters. A
// password never appears in an error.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Driver, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed URL", backend.ErrBadURL)
	}
	d, err := openURL(ctx, u, opts)
	if err != nil {
		return nil, scrub(err, u)
	}
	return d, nil
}

func openURL(ctx context.Context, u *url.URL, extra []Option) (*Driver, error) {
	uri, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return nil, fmt.Errorf("mongolock: connect: %w", err)
	}
	if err := client.Ping(ctx, readpref.Primary()); err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), disconnectTimeout)
		defer cancel()
		_ = client.Disconnect(dctx)
		return nil, fmt.Errorf("mongolock: connect: %w", err)
	}
	d, err := newDriver(client, true, append(opts, extra...))
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), disconnectTimeout)
		defer cancel()
		_ = client.Disconnect(dctx)
		return nil, err
	}
	return d, nil
}

// parseURL returns the connection string for the Go driver (without
// golocker's parameters) and the options the URL sets. The path names the
// database; collection is golocker's only parameter; every other
// parameter must be one the Go driver knows.
func parseURL(u *url.URL) (string, []Option, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != Scheme && scheme != SchemeSRV {
		return "", nil, fmt.Errorf("%w: scheme %q is not mongodb or mongodb+srv", backend.ErrBadURL, u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return "", nil, fmt.Errorf("%w: want %s://[user:password@]host[:27017][,host2...]/[database][?options]", backend.ErrBadURL, scheme)
	}
	if u.Fragment != "" {
		return "", nil, fmt.Errorf("%w: a fragment (#...) is not allowed", backend.ErrBadURL)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", nil, fmt.Errorf("%w: malformed query", backend.ErrBadURL)
	}
	var opts []Option
	if c, ok := q["collection"]; ok {
		if len(c) != 1 {
			return "", nil, fmt.Errorf("%w: collection given %d times", backend.ErrBadURL, len(c))
		}
		opts = append(opts, WithCollection(c[0]))
		q.Del("collection")
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		opts = append(opts, WithDatabase(db))
	}
	o := defaultConfig()
	if err := o.apply(opts); err != nil {
		return "", nil, fmt.Errorf("%w: %v", backend.ErrBadURL, err)
	}
	rest := *u
	rest.RawQuery = q.Encode()
	uri := rest.String()
	// Parse as mongodb:// only to check the options: for mongodb+srv the
	// driver's parser would also look up DNS records.
	check := rest
	check.Scheme = Scheme
	cs, err := connstring.Parse(check.String())
	if err != nil {
		// The driver's message may quote the URI, password included.
		return "", nil, fmt.Errorf("%w: the MongoDB driver rejects the URL", backend.ErrBadURL)
	}
	if len(cs.UnknownOptions) > 0 {
		var names []string
		for k := range cs.UnknownOptions {
			names = append(names, k)
		}
		sort.Strings(names)
		return "", nil, fmt.Errorf("%w: unknown parameter(s) %s (golocker's: collection; the rest must be MongoDB connection string options)",
			backend.ErrBadURL, strings.Join(names, ", "))
	}
	return uri, opts, nil
}

// scrub hides u's password wherever it appears in err's message.
func scrub(err error, u *url.URL) error {
	if u.User == nil {
		return err
	}
	p, ok := u.User.Password()
	if !ok || p == "" {
		return err
	}
	secrets := []string{p, url.QueryEscape(p), url.PathEscape(p)}
	msg := err.Error()
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			return &scrubbed{err: err, secrets: secrets}
		}
	}
	return err
}

type scrubbed struct {
	err     error
	secrets []string
}

func (e *scrubbed) Error() string {
	s := e.err.Error()
	for _, p := range e.secrets {
		s = strings.ReplaceAll(s, p, "xxxxx")
	}
	return s
}

func (e *scrubbed) Unwrap() error { return e.err }
