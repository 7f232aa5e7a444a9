package driverkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCause(t *testing.T) {
	auth := errors.New("WRONGPASS")
	classify := func(err error) string {
		if errors.Is(err, auth) {
			return CauseAuth
		}
		return ""
	}
	cases := []struct {
		name  string
		err   error
		tlsOn bool
		want  string
	}{
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false, CauseRefused},
		{"unknown host", fmt.Errorf("dial: %w", &net.DNSError{Name: "x.invalid", IsNotFound: true}), false, CauseUnknownHost},
		{"handshake closed", &handshakeError{err: io.EOF}, true, CauseNotTLS},
		{"handshake timed out", &handshakeError{err: context.DeadlineExceeded}, true, CauseSilentTLS},
		{"plaintext closed", io.EOF, false, CauseMayExpectTLS},
		{"TLS closed elsewhere", io.EOF, true, ""},
		{"sniffed TLS", fmt.Errorf("x (probe: %w)", errSpeaksTLS), false, CauseExpectsTLS},
		{"deadline", context.DeadlineExceeded, false, CauseNoAnswer},
		{"the driver's", fmt.Errorf("x: %w", auth), false, CauseAuth},
		{"unknown", errors.New("something else"), false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Cause(c.err, c.tlsOn, classify); got != c.want {
				t.Errorf("Cause(%v) = %q, want %q", c.err, got, c.want)
			}
		})
	}
}

func TestConnectError(t *testing.T) {
	err := ConnectError(fmt.Errorf("ping: %w", context.DeadlineExceeded), false, nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), CauseNoAnswer+": ping:") {
		t.Errorf("ConnectError = %v, want the cause before the error, which it wraps", err)
	}
	refused := fmt.Errorf("dial: %w", syscall.ECONNREFUSED) // its message says "connection refused"
	if err := ConnectError(refused, false, nil); err != refused {
		t.Errorf("ConnectError = %v, want the error as it was", err)
	}
}

// TestReach checks that a probe that finds nothing listening ends the
// open call at once, with the probe's error.
func TestReach(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err = Reach(ctx, nil, []string{addr}, nil, false, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if !errors.Is(err, syscall.ECONNREFUSED) || !strings.Contains(err.Error(), addr) {
		t.Errorf("Reach = %v, want the probe's refused connection to %s", err, addr)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("Reach took %v", took)
	}
}
