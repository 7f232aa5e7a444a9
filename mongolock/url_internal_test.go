package mongolock

import (
	"net/url"
	"testing"

	"github.com/golocker/locker/internal/driverkit"
	"github.com/golocker/locker/internal/drivertest"
)

const secret = "s3cr%2Ft-pw"

// parseOnly parses u for the checks of refused URLs: only its error counts.
func parseOnly(u *url.URL) error {
	_, _, err := parseURL(u)
	return err
}

func TestParseURL(t *testing.T) {
	good := []struct{ url, uri, db, coll string }{
		{"mongodb://u:" + secret + "@h1:27017,h2:27017/app?replicaSet=rs0&collection=locks",
			"mongodb://u:" + secret + "@h1:27017,h2:27017/app?replicaSet=rs0", "app", "locks"},
		{"mongodb://h/", "mongodb://h/", DefaultDatabase, DefaultCollection},
		{"mongodb://h", "mongodb://h", DefaultDatabase, DefaultCollection},
		{"mongodb+srv://u:" + secret + "@cluster.example.com/app?authSource=admin&w=majority",
			"mongodb+srv://u:" + secret + "@cluster.example.com/app?authSource=admin&w=majority", "app", DefaultCollection},
		{"mongodb://h/app?tls=true&timeoutMS=5000", "mongodb://h/app?timeoutMS=5000&tls=true", "app", DefaultCollection},
	}
	for _, tc := range good {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		uri, opts, err := parseURL(u)
		if err != nil {
			t.Errorf("parseURL(%s): %v", tc.url, err)
			continue
		}
		if uri != tc.uri {
			t.Errorf("parseURL(%s): URI %s, want %s", tc.url, uri, tc.uri)
		}
		o := defaultConfig()
		if err := driverkit.Apply(&o, opts); err != nil || o.database != tc.db || o.collection != tc.coll {
			t.Errorf("parseURL(%s): database %q collection %q (%v), want %q %q", tc.url, o.database, o.collection, err, tc.db, tc.coll)
		}
	}
	bad := []string{
		"mongodb://u:" + secret + "@h/app?colection=x",         // typo
		"mongodb://u:" + secret + "@h/app?collection=a$b",      // bad collection
		"mongodb://u:" + secret + "@h/app?collection=system.x", // reserved
		"mongodb://u:" + secret + "@h/app?collection=a&collection=b",
		"mongodb://u:" + secret + "@h/a.b",         // bad database
		"mongodb://u:" + secret + "@h/app#frag",    // fragment
		"mongodb://u:" + secret + "@h/app?table=x", // the SQL driver's
		"mongodb:opaque", // not hierarchical
		"mongodb:///app", // no host
		"redis://h/app",  // scheme
	}
	for _, raw := range bad {
		t.Run(raw, func(t *testing.T) { drivertest.BadURL(t, raw, "", parseOnly, secret, "s3cr/t-pw") })
	}
	// Unacknowledged writes cannot take, renew or release a lock.
	drivertest.BadURL(t, "mongodb://u:"+secret+"@h/app?w=0", "w=0: a lock needs acknowledged writes", parseOnly, secret)
}

// FuzzParseURL: no URL makes the parser panic, look up DNS, or put the
// password in an error.
func FuzzParseURL(f *testing.F) {
	parse := func(u *url.URL) (string, error) { uri, _, err := parseURL(u); return uri, err }
	drivertest.FuzzURL(f, parse, nil,
		"mongodb://u:pw@h1,h2:27018/db?replicaSet=rs&collection=c", "mongodb+srv://u:pw@c.example.com/db",
		"mongodb://h/db?x=1", "mongodb://h/?collection=", "mongodb://u:pw@h/db?authMechanism=SCRAM-SHA-256",
	)
}
