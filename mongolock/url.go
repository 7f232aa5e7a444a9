package mongolock

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
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

// DefaultOpenTimeout bounds Open when its ctx has no deadline.
const DefaultOpenTimeout = driverkit.OpenTimeout

// Open connects a new client to the deployment that rawURL names (see the
// package doc), checks that a primary answers, and returns a Driver whose
// Close disconnects the client. opts apply after the URL's parameters. It
// returns when ctx ends, and within DefaultOpenTimeout when ctx has no
// deadline. Errors name the hosts tried and the cause (connection refused,
// unknown host, TLS that the server does not speak or a TLS server met
// without it, authentication failed), and never show the password.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Driver, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, driverkit.BadURL("mongolock", "malformed URL")
	}
	return openURL(ctx, u, opts)
}

func openURL(ctx context.Context, u *url.URL, extra []Option) (*Driver, error) {
	d, err := connect(ctx, u, extra)
	return d, driverkit.Scrub(err, u)
}

func connect(ctx context.Context, u *url.URL, extra []Option) (*Driver, error) {
	uri, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	opts = append(opts, extra...)
	o := defaultConfig()
	if err := driverkit.Apply(&o, opts); err != nil {
		return nil, err
	}
	// The Go driver logs to its sink (stderr by default, when the
	// MONGODB_LOG_* variables ask for it): to the Client's logger here.
	log := &logSink{}
	copts := options.Client().ApplyURI(uri).SetLoggerOptions(options.Logger().SetSink(log))
	if o.dialer != nil {
		copts.SetDialer(dialFunc(o.dialer))
	}
	ctx, cancel := driverkit.OpenContext(ctx, DefaultOpenTimeout)
	defer cancel()
	var tc *tls.Config
	if tlsOn(uri) {
		// The probe learns whether the server speaks TLS at all; the
		// client checks its certificate.
		tc = &tls.Config{InsecureSkipVerify: true}
	}
	var addrs []string
	if strings.EqualFold(u.Scheme, Scheme) {
		addrs, _ = driverkit.Hosts(u.Host, "27017")
	}
	// The Go driver retries its connections until server selection gives
	// up: probes of the hosts tell why none can be reached, at once when
	// waiting cannot help.
	d, err := driverkit.Reach(ctx, o.dialer, addrs, tc, tc == nil, func(ctx context.Context) (*Driver, error) {
		return connectClient(ctx, copts, log, opts)
	})
	if err != nil {
		return nil, fmt.Errorf("mongolock: connect to %s: %w", u.Host, driverkit.ConnectError(err, tc != nil, authCause))
	}
	return d, nil
}

// connectClient connects a client of copts and checks that a primary
// answers within ctx.
func connectClient(ctx context.Context, copts *options.ClientOptions, log *logSink, opts []Option) (*Driver, error) {
	client, err := mongo.Connect(copts)
	if err != nil {
		return nil, err
	}
	disconnect := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), disconnectTimeout)
		defer cancel()
		_ = client.Disconnect(dctx)
	}
	// Ping honours ctx; the wait below makes sure of it.
	pinged := make(chan error, 1)
	go func() { pinged <- client.Ping(ctx, readpref.Primary()) }()
	select {
	case err = <-pinged:
	case <-ctx.Done():
		go func() { <-pinged; disconnect() }()
		return nil, ctx.Err()
	}
	if err != nil {
		disconnect()
		return nil, err
	}
	d, err := newDriver(client, true, log, opts)
	if err != nil {
		disconnect()
		return nil, err
	}
	return d, nil
}

// tlsOn reports whether the connection string asks for TLS (mongodb+srv
// does by default).
func tlsOn(uri string) bool {
	cs, err := connstring.Parse(strings.Replace(uri, SchemeSRV+"://", Scheme+"://", 1))
	if err != nil {
		return false
	}
	return cs.SSL || strings.HasPrefix(uri, SchemeSRV+"://") && !cs.SSLSet
}

// authCause tells the Go driver's refusal of the credentials.
func authCause(err error) string {
	if strings.Contains(err.Error(), "auth error") || strings.Contains(err.Error(), "AuthenticationFailed") {
		return driverkit.CauseAuth
	}
	return ""
}

// dialFunc is a dial function as the Go driver takes one.
type dialFunc func(ctx context.Context, network, address string) (net.Conn, error)

func (f dialFunc) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return f(ctx, network, address)
}

// parseURL returns the connection string for the Go driver (without
// golocker's parameters) and the options the URL sets. The path names the
// database; collection is golocker's only parameter; every other
// parameter must be one the Go driver knows.
func parseURL(u *url.URL) (string, []Option, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != Scheme && scheme != SchemeSRV {
		return "", nil, driverkit.BadURL("mongolock", "scheme %q is not mongodb or mongodb+srv", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return "", nil, driverkit.BadURL("mongolock", "want %s://[user:password@]host[:27017][,host2...]/[database][?options]", scheme)
	}
	if u.Fragment != "" {
		return "", nil, driverkit.BadURL("mongolock", "a fragment (#...) is not allowed")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", nil, driverkit.BadURL("mongolock", "malformed query")
	}
	var opts []Option
	if c, ok := q["collection"]; ok {
		if len(c) != 1 {
			return "", nil, driverkit.BadURL("mongolock", "collection given %d times", len(c))
		}
		opts = append(opts, WithCollection(c[0]))
		q.Del("collection")
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		opts = append(opts, WithDatabase(db))
	}
	o := defaultConfig()
	if err := driverkit.Apply(&o, opts); err != nil {
		return "", nil, driverkit.BadURL("mongolock", "%v", err)
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
		return "", nil, driverkit.BadURL("mongolock", "the MongoDB driver rejects the URL")
	}
	if len(cs.UnknownOptions) > 0 {
		var names []string
		for k := range cs.UnknownOptions {
			names = append(names, k)
		}
		sort.Strings(names)
		return "", nil, driverkit.BadURL("mongolock", "unknown parameter(s) %s (golocker's: collection; the rest must be MongoDB connection string options)",
			strings.Join(names, ", "))
	}
	if cs.WNumberSet && cs.WNumber == 0 {
		// The server does not answer an unacknowledged write: an acquisition
		// could not tell whether it took the lock, nor a renewal or a release
		// whether the hold was still there.
		return "", nil, driverkit.BadURL("mongolock", "w=0: a lock needs acknowledged writes (w=1, w=majority, or no w)")
	}
	return uri, opts, nil
}
