package driverkit

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/golocker/locker/backend"
)

// Open is the Open of a driver package pkg (e.g. "etcdlock"): it parses
// rawURL, hands it to open, and says which URL failed, its password
// hidden. url.Parse's own error repeats the URL, password included, so
// only its cause is kept; a URL that does not parse is backend.ErrBadURL.
// The password is also hidden in open's error, should the store's client
// repeat it.
func Open[D any](pkg, rawURL string, open func(*url.URL) (D, error)) (D, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		var none D
		return none, fmt.Errorf("%s: open %s: %w: %v", pkg, Redact(rawURL), backend.ErrBadURL, err)
	}
	d, err := open(u)
	if err != nil {
		// The store's client may repeat what it was given, password
		// included, in its error: hidden too.
		var none D
		return none, fmt.Errorf("%s: open %s: %w", pkg, Redact(rawURL), Scrub(err, u))
	}
	return d, nil
}

// HostsURL is what a URL of a store reached through a list of hosts says:
//
//	scheme://[user:password@]host1[:port][,host2[:port]...][/path][?query]
type HostsURL struct {
	Hosts              []string // host:port each, the default port where none is given
	Username, Password string
	Path               string // without its trailing '/'; "" when none
}

// ParseHostsURL reads u as a HostsURL of scheme, the default port added
// to hosts given without one. It leaves the query to the driver. Its
// errors are BadURL errors of pkg and never contain the password.
func ParseHostsURL(pkg, scheme, defaultPort string, u *url.URL) (HostsURL, error) {
	var h HostsURL
	switch {
	case !strings.EqualFold(u.Scheme, scheme):
		return h, BadURL(pkg, "scheme %q, want %s://", u.Scheme, scheme)
	case u.Opaque != "":
		return h, BadURL(pkg, "want %s://host:%s[/prefix]", scheme, defaultPort)
	case u.Fragment != "" || u.RawFragment != "":
		return h, BadURL(pkg, "%s:// takes no fragment", scheme)
	case u.Host == "":
		return h, BadURL(pkg, "no host (want %s://host:%s)", scheme, defaultPort)
	}
	if u.User != nil {
		h.Username = u.User.Username()
		h.Password, _ = u.User.Password()
		if h.Username == "" {
			return h, BadURL(pkg, "a password without a user name")
		}
	}
	hosts, err := Hosts(u.Host, defaultPort)
	if err != nil {
		return h, BadURL(pkg, "%v", err)
	}
	h.Hosts = hosts
	if u.Path != "/" {
		h.Path = strings.TrimSuffix(u.Path, "/")
	}
	return h, nil
}

// URLConfig is what a driver's parser makes of a URL: its own settings,
// and the options that the URL's parameters set.
type URLConfig[O any] interface {
	URLOptions() []O
}

// Opener is how a driver opens its URLs: Parse reads one, without
// touching the network; Open makes the driver of what Parse read and of
// the options, Defaults with the URL's options and the caller's applied.
type Opener[C URLConfig[O], T any, O ~func(*T) error, D backend.Driver] struct {
	Pkg      string // "etcdlock"
	Parse    func(*url.URL) (C, error)
	Defaults func() T
	Open     func(context.Context, C, T) (D, error)
}

// OpenURL opens u; extra apply after the URL's options.
func (op *Opener[C, T, O, D]) OpenURL(ctx context.Context, u *url.URL, extra []O) (D, error) {
	var none D
	cfg, err := op.Parse(u)
	if err != nil {
		return none, err
	}
	o := op.Defaults()
	if err := Apply(&o, append(cfg.URLOptions(), extra...)); err != nil {
		return none, err
	}
	return op.Open(ctx, cfg, o)
}

// OpenRaw is the driver package's Open of rawURL: OpenURL, its errors
// saying which URL failed, the password hidden (Open).
func (op *Opener[C, T, O, D]) OpenRaw(ctx context.Context, rawURL string, extra []O) (D, error) {
	return Open(op.Pkg, rawURL, func(u *url.URL) (D, error) { return op.OpenURL(ctx, u, extra) })
}

// ForLocker is OpenURL as package locker's registry takes it (an Opener of
// package locker).
func (op *Opener[C, T, O, D]) ForLocker(ctx context.Context, u *url.URL) (backend.Driver, error) {
	return op.OpenURL(ctx, u, nil)
}
