package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/signal"
	"strings"
	"syscall"

	"github.com/golocker/locker/lockadmin"
)

// Where serve finds credentials when no flag names a variable. Credentials
// never come from a flag's value, which anyone can read in ps.
const (
	tokenEnvDefault = "LOCKER_ADMIN_TOKEN"
	basicEnvDefault = "LOCKER_ADMIN_BASIC_AUTH"
)

// cmdServe serves the admin page (package lockadmin) for the backend
// until SIGINT or SIGTERM, then shuts down gracefully. It refuses a
// non-loopback address without authentication. The audit log of releases
// goes to stderr as JSON lines.
func cmdServe(ctx context.Context, g globals, args []string, e env) error {
	fs := newFlags("serve", &g)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	readOnly := fs.Bool("read-only", false, "list holds, never release them")
	tokenEnv := fs.String("token-env", "", "environment variable holding the bearer token (default "+tokenEnvDefault+")")
	basicEnv := fs.String("basic-auth-env", "", "environment variable holding user:password (default "+basicEnvDefault+")")
	prefix := fs.String("prefix", "", "only locks whose names start with this")
	if err := parseNoArgs(fs, args, ""); err != nil {
		return err
	}
	auth, err := serveAuth(e, *tokenEnv, *basicEnv)
	if err != nil {
		return err
	}
	need, err := lockadmin.NeedsAuth(*addr)
	if err != nil {
		return usage("serve: --addr: %v", err)
	}
	if need && len(auth) == 0 {
		return usage("serve: %v: %s is not a loopback address; set %s (a token) or %s (user:password), or name another variable with --token-env or --basic-auth-env",
			lockadmin.ErrNoAuth, *addr, tokenEnvDefault, basicEnvDefault)
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, u, err := open(ctx, g, e)
	if err != nil {
		return err
	}
	defer c.Close()
	opts := append(auth,
		lockadmin.WithAuditLog(slog.New(slog.NewJSONHandler(e.stderr, nil))),
		lockadmin.WithBackendURL(u),
		lockadmin.WithPrefix(*prefix),
	)
	if *readOnly {
		opts = append(opts, lockadmin.WithReadOnly())
	}
	h, err := lockadmin.New(c, opts...)
	if err != nil {
		return usage("serve: %v", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", *addr)
	if err != nil {
		return fail(exitFailure, "serve: %v", err)
	}
	fmt.Fprintf(e.stderr, "lockctl: serving the admin page of %s on http://%s/\n", u, ln.Addr())
	if err := lockadmin.Serve(ctx, ln, h); errors.Is(err, lockadmin.ErrNoAuth) {
		return usage("serve: %v", err)
	} else if err != nil {
		return fail(exitFailure, "serve: %v", err)
	}
	fmt.Fprintln(e.stderr, "lockctl: admin page stopped")
	return nil
}

// serveAuth reads the credentials from the environment: from the
// variables the flags name, else from the default ones. A variable named
// by a flag must be set.
func serveAuth(e env, tokenEnv, basicEnv string) ([]lockadmin.Option, error) {
	var opts []lockadmin.Option
	read := func(flagVar, def, flag string) (string, error) {
		if flagVar == "" {
			return e.getenv(def), nil
		}
		v := e.getenv(flagVar)
		if v == "" {
			return "", usage("serve: %s %s: the variable is unset or empty", flag, flagVar)
		}
		return v, nil
	}
	tok, err := read(tokenEnv, tokenEnvDefault, "--token-env")
	if err != nil {
		return nil, err
	}
	if tok != "" {
		if len(tok) < lockadmin.MinTokenLen {
			return nil, usage("serve: the bearer token is shorter than %d bytes", lockadmin.MinTokenLen)
		}
		opts = append(opts, lockadmin.WithBearerToken(tok))
	}
	basic, err := read(basicEnv, basicEnvDefault, "--basic-auth-env")
	if err != nil {
		return nil, err
	}
	if basic != "" {
		user, pass, ok := strings.Cut(basic, ":")
		if !ok || user == "" || pass == "" {
			return nil, usage("serve: basic auth credentials must be user:password")
		}
		opts = append(opts, lockadmin.WithBasicAuth(user, pass))
	}
	return opts, nil
}
