package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
// fallback tells that it is the default.
func backendURL(g globals, e env) (u string, fallback bool, err error) {
	if g.url != "" {
		return g.url, false, nil
	}
	if u := e.getenv("LOCKER_URL"); u != "" {
		return u, false, nil
	}
	u, err = defaultURL()
	return u, true, err
}

// open opens a Client on the chosen backend. An in-process backend is
// refused: no other process would see its locks. When it falls back to the
// default backend, it says so on stderr, so that nobody wonders why their
// locks are not where they look. Errors never contain a password:
// locker.Open redacts them.
func open(ctx context.Context, g globals, e env, opts ...locker.Option) (*locker.Client, string, error) {
	u, fallback, err := backendURL(g, e)
	if err != nil {
		return nil, "", fail(exitBackend, "cannot find a place for the default backend: %v", err)
	}
	if fallback {
		fmt.Fprintf(e.stderr, "lockctl: no --url and no $LOCKER_URL: using the default backend %s\n", u)
	}
	c, err := locker.Open(ctx, u, append([]locker.Option{locker.RequireCrossProcess()}, opts...)...)
	if err != nil {
		code := exitBackend
		if errors.Is(err, locker.ErrUnknownScheme) || errors.Is(err, locker.ErrBadURL) || errors.Is(err, locker.ErrInvalidOption) || errors.Is(err, locker.ErrInvalidTTL) {
			code = exitUsage
		}
		return nil, "", fail(code, "%v", err)
	}
	return c, locker.Redact(u), nil
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
