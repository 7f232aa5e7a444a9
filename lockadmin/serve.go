package lockadmin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ErrNoAuth is returned by ListenAndServe and Serve for a non-loopback
// address when the handler has no authentication.
var ErrNoAuth = errors.New("lockadmin: refusing to serve on a non-loopback address without authentication")

// shutdownTimeout bounds the graceful shutdown when ctx ends.
const shutdownTimeout = 5 * time.Second

// NeedsAuth reports whether serving on addr ("host:port") needs
// authentication: it does unless host is "localhost" or a loopback IP
// address. An empty host (every interface) and every other name need it:
// a name is not resolved, as it could resolve elsewhere later.
func NeedsAuth(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return true, fmt.Errorf("lockadmin: bad address %q: %w", addr, err)
	}
	return host == "" || !loopbackHost(host), nil
}

// ListenAndServe listens on addr and serves h at its root until ctx ends,
// then shuts down gracefully. It refuses, with an error wrapping ErrNoAuth
// and without listening, a non-loopback addr when h has no authentication.
func ListenAndServe(ctx context.Context, addr string, h *Handler) error {
	need, err := NeedsAuth(addr)
	if err != nil {
		return err
	}
	if need && !h.cfg.authenticated() {
		return fmt.Errorf("%w: %s (configure a bearer token or basic auth)", ErrNoAuth, addr)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("lockadmin: %w", err)
	}
	return Serve(ctx, ln, h)
}

// Serve serves h at the root of ln until ctx ends, then shuts down
// gracefully; it closes ln. It refuses, with an error wrapping ErrNoAuth,
// a listener on a non-loopback TCP address when h has no authentication
// (this checks the address ln is bound to, whatever name was asked for).
func Serve(ctx context.Context, ln net.Listener, h *Handler) error {
	if !h.cfg.authenticated() && !loopbackListener(ln.Addr()) {
		ln.Close()
		return fmt.Errorf("%w: %s (configure a bearer token or basic auth)", ErrNoAuth, ln.Addr())
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		select {
		case <-ctx.Done():
		case <-stop:
			done <- nil
			return
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		done <- srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	if !errors.Is(err, http.ErrServerClosed) {
		// Serve failed on its own: end the shutdown goroutine.
		close(stop)
		<-done
		_ = srv.Close()
		return fmt.Errorf("lockadmin: %w", err)
	}
	if err := <-done; err != nil {
		return fmt.Errorf("lockadmin: shutdown: %w", err)
	}
	return nil
}

// loopbackListener reports whether a is a loopback TCP address or a Unix
// socket (reachable only through the file system).
func loopbackListener(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}
