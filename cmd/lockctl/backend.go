package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/driverkit"
)

// quote quotes a lock name for a message, cut after its first bytes when
// it is long.
func quote(name string) string { return driverkit.QuoteName(name) }

// defaultURL is the embedded default backend: a SQLite file in the user's
// cache directory, created on first use.
func defaultURL() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "golocker")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return "sqlite://" + filepath.ToSlash(filepath.Join(dir, "lockctl.db")), nil
}

// backendURL picks the URL: --url, then $LOCKER_URL, then the default;
// from says which ("--url", "$LOCKER_URL", or "" for the default).
func backendURL(g globals, e env) (u, from string, err error) {
	if g.url != "" {
		return g.url, "--url", nil
	}
	if u := e.getenv("LOCKER_URL"); u != "" {
		return u, "$LOCKER_URL", nil
	}
	u, err = defaultURL()
	return u, "", err
}

// usesDefault reports whether the command uses the default backend.
func usesDefault(g globals, e env) bool { return g.url == "" && e.getenv("LOCKER_URL") == "" }

// defaultHint ends a message that found nothing on the default backend:
// the locks the user looks for may be on the backend they forgot to name.
func defaultHint(g globals, e env, shown string) string {
	if !usesDefault(g, e) {
		return ""
	}
	return fmt.Sprintf(" (on the default backend %s: no --url, no $LOCKER_URL)", shown)
}

// open opens a Client on the chosen backend. An in-process backend is
// refused: no other process would see its locks. The default backend is
// named on stderr when open creates its database, on the first use of
// lockctl without a URL by this user on this machine, so that nobody
// wonders where their locks went; later uses are quiet (list and release
// name it when they find nothing, serve, bench and demo always name
// their backend). Errors never contain a password: locker.Open redacts
// them.
func open(ctx context.Context, g globals, e env, opts ...locker.Option) (*locker.Client, string, error) {
	u, from, err := backendURL(g, e)
	if err != nil {
		return nil, "", fail(exitBackend, "cannot find a place for the default backend: %v", err)
	}
	created := false
	if from == "" {
		_, err := os.Stat(strings.TrimPrefix(u, "sqlite://"))
		created = errors.Is(err, fs.ErrNotExist)
	}
	c, err := locker.Open(ctx, u, append([]locker.Option{locker.RequireCrossProcess()}, opts...)...)
	if err != nil {
		code := exitBackend
		switch {
		case errors.Is(err, locker.ErrUnknownScheme):
			return nil, "", usage("%s", unknownScheme(u, from))
		case errors.Is(err, locker.ErrBadURL) || errors.Is(err, locker.ErrInvalidOption) || errors.Is(err, locker.ErrInvalidTTL):
			code = exitUsage
		}
		return nil, "", fail(code, "%v", err)
	}
	if created {
		fmt.Fprintf(e.stderr, "lockctl: no --url and no $LOCKER_URL: created the default backend %s, which this user's lockctl on this machine uses from now on\n", u)
	}
	return c, locker.Redact(u), nil
}

// unknownScheme is lockctl's message for a URL whose scheme no driver
// registered: the schemes lockctl supports, rather than the library's
// hint about a forgotten import, which is for Go programmers.
func unknownScheme(u, from string) string {
	scheme := u
	if p, err := url.Parse(u); err == nil {
		scheme = p.Scheme
	}
	var known []string
	for _, s := range locker.Schemes() {
		if s != "mem" { // refused: see open
			known = append(known, s)
		}
	}
	return fmt.Sprintf("%s: unknown backend %s; lockctl supports %s",
		from, quote(strings.ToLower(scheme)+"://"), strings.Join(known, ", "))
}

// sharedBackend opens the backend g names, checks that it is shared between
// processes, as the worker processes of cmd (demo, load) need, and closes
// it. It returns the backend as shown to the user; hint ends the error
// that refuses a backend.
func sharedBackend(ctx context.Context, g globals, e env, cmd, hint string) (shown string, err error) {
	c, shown, err := open(ctx, g, e)
	if err != nil {
		return "", err
	}
	crossProcess := c.Capabilities().CrossProcess
	_ = c.Close()
	if !crossProcess {
		return "", fail(exitUsage, "%s needs a backend shared between processes; %s is not%s", cmd, shown, hint)
	}
	return shown, nil
}

// workerFiles returns this executable, which cmd starts as its worker
// processes, and a new temp directory for the files they share, which the
// caller removes.
func workerFiles(cmd string) (self, dir string, err error) {
	self, err = os.Executable()
	if err != nil {
		return "", "", fail(exitFailure, "%s: %v", cmd, err)
	}
	dir, err = os.MkdirTemp("", "lockctl-"+cmd+"-")
	if err != nil {
		return "", "", fail(exitFailure, "%s: %v", cmd, err)
	}
	return self, dir, nil
}
