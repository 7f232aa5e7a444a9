package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/golocker/locker"
)

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

// backendURL picks the URL: --url, then $LOCKER_URL, then the default.
func backendURL(g globals, e env) (string, error) {
	if g.url != "" {
		return g.url, nil
	}
	if u := e.getenv("LOCKER_URL"); u != "" {
		return u, nil
	}
	return defaultURL()
}

// open opens a Client on the chosen backend. Errors never contain a
// password: locker.Open redacts them.
func open(ctx context.Context, g globals, e env, opts ...locker.Option) (*locker.Client, string, error) {
	u, err := backendURL(g, e)
	if err != nil {
		return nil, "", fail(exitBackend, "cannot find a place for the default backend: %v", err)
	}
	c, err := locker.Open(ctx, u, opts...)
	if err != nil {
		code := exitBackend
		if errors.Is(err, locker.ErrUnknownScheme) || errors.Is(err, locker.ErrBadURL) || errors.Is(err, locker.ErrInvalidOption) || errors.Is(err, locker.ErrInvalidTTL) {
			code = exitUsage
		}
		return nil, "", fail(code, "%v", err)
	}
	return c, locker.Redact(u), nil
}
