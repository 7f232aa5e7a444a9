package driverkit

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"
)

// OpenTimeout bounds a driver's Open whose ctx has no deadline: a store
// that cannot be reached fails Open within it, with the cause (Cause). A
// deadline of ctx governs instead, shorter or longer.
const OpenTimeout = 5 * time.Second

// OpenContext returns ctx bounded by d when ctx has no deadline of its own.
func OpenContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// Causes that Cause names, in plain words.
const (
	CauseRefused      = "connection refused"
	CauseUnknownHost  = "unknown host"
	CauseNotTLS       = "TLS handshake failed: the server does not speak TLS"
	CauseSilentTLS    = "no answer to the TLS handshake: the server may not speak TLS"
	CauseCertificate  = "TLS certificate rejected"
	CauseTLS          = "TLS handshake failed"
	CauseMayExpectTLS = "the server closed the connection: it may expect TLS"
	CauseExpectsTLS   = "the server speaks TLS, the client does not"
	CauseAuth         = "authentication failed"
	CauseNoAnswer     = "no answer"
)

// Classify is a driver's own reading of an error of its store's client:
// the cause, one of the Cause constants (CauseAuth for a refusal of the
// credentials), or "" when it knows none.
type Classify func(error) string

// Cause names, in plain words, why connecting to a store failed with err:
// one of the Cause constants, or "" when it knows nothing more than err
// says. tlsOn says whether the client spoke TLS; classify (may be nil)
// reads the errors of the store's own client first.
func Cause(err error, tlsOn bool, classify Classify) string {
	if err == nil {
		return ""
	}
	if classify != nil {
		if c := classify(err); c != "" {
			return c
		}
	}
	var dns *net.DNSError
	var rec tls.RecordHeaderError
	var hs *handshakeError
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var badCert x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return CauseUnknownHost
	case errors.Is(err, syscall.ECONNREFUSED):
		return CauseRefused
	case errors.As(err, &rec):
		return CauseNotTLS
	case errors.As(err, &unknownCA), errors.As(err, &badHost), errors.As(err, &badCert), errors.As(err, &verify):
		return CauseCertificate
	case errors.Is(err, errSpeaksTLS):
		return CauseExpectsTLS
	case errors.As(err, &hs):
		switch {
		case closed(hs.err):
			return CauseNotTLS
		case timedOut(hs.err):
			return CauseSilentTLS
		}
		return CauseTLS
	case !tlsOn && closed(err):
		return CauseMayExpectTLS
	case timedOut(err):
		return CauseNoAnswer
	}
	return ""
}

// closed reports whether err is the peer's closing of the connection.
func closed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// ConnectError returns err with its Cause before it, "<cause>: <err>", or
// err itself when Cause names none or err's message already says it.
// errors.Is and errors.As see err.
func ConnectError(err error, tlsOn bool, classify Classify) error {
	c := Cause(err, tlsOn, classify)
	if c == "" || strings.Contains(err.Error(), c) {
		return err
	}
	return &connectError{cause: c, err: err}
}

type connectError struct {
	cause string
	err   error
}

func (e *connectError) Error() string { return e.cause + ": " + e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// handshakeError is the error of a TLS handshake, so that Cause can tell a
// server that closes the connection or does not answer it.
type handshakeError struct{ err error }

func (e *handshakeError) Error() string { return "TLS handshake: " + e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }

// IsHandshake reports whether err is the error of Handshake.
func IsHandshake(err error) bool {
	var hs *handshakeError
	return errors.As(err, &hs)
}

// Handshake does the TLS client handshake of tc on c, within ctx. On
// error it closes c; the error tells Cause that the handshake failed.
func Handshake(ctx context.Context, c net.Conn, tc *tls.Config) (*tls.Conn, error) {
	tconn := tls.Client(c, tc.Clone())
	if err := tconn.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, &handshakeError{err: err}
	}
	return tconn, nil
}

// errSpeaksTLS is what Probe finds of a server that a client without TLS
// dials, when the server answers a TLS handshake.
var errSpeaksTLS = errors.New("it answers a TLS handshake")

// Probe connects to addr through dial (nil: a net.Dialer) as a store's
// client would, within ctx, and closes the connection. With tc, it does
// the TLS handshake of tc; without, when sniffTLS is set, it tries a TLS
// handshake (certificates unchecked) on a second connection a second
// later, and reports a server that answers it (Cause: CauseExpectsTLS). Its error is the dial's or the handshake's,
// which Cause reads.
func Probe(ctx context.Context, dial DialFunc, addr string, tc *tls.Config, sniffTLS bool) error {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	switch {
	case tc != nil:
		if tc.ServerName == "" {
			// As the clients do: the name of the host dialled.
			tc = tc.Clone()
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tconn, err := Handshake(ctx, c, tc)
		if err != nil {
			return err
		}
		return tconn.Close()
	case sniffTLS:
		_ = c.Close()
		return sniff(ctx, dial, addr)
	}
	return c.Close()
}

// sniffAfter is how long a client may take to connect before a probe
// asks its server whether it speaks TLS: a server that the client reaches
// in time sees no ClientHello (which it may log as an error).
const sniffAfter = time.Second

// sniff reports errSpeaksTLS when the server at addr answers a TLS
// handshake, asked sniffAfter from now unless ctx ends before.
func sniff(ctx context.Context, dial DialFunc, addr string) error {
	t := time.NewTimer(sniffAfter)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil
	case <-t.C:
	}
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	// A plaintext server answers a ClientHello with an error, closes the
	// connection, or waits for more: only a TLS one says hello.
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	tconn, err := Handshake(sctx, c, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return nil
	}
	_ = tconn.Close()
	return errSpeaksTLS
}

// definite reports whether a Probe error shows that the server cannot be
// reached, whatever the client tries: no waiting can make it answer.
func definite(err error) bool {
	switch Cause(err, true, nil) {
	case CauseRefused, CauseUnknownHost, CauseNotTLS, CauseCertificate:
		return true
	}
	return false
}

// Reach runs open, a client's connection to a store whose client retries
// silently (it reports only a ctx error in the end), beside a Probe of
// each of addrs. When every probe fails for a cause that waiting does not
// cure (refused, unknown host, not TLS, certificate rejected), open's ctx
// ends at once and Reach returns the probes' errors. When open fails
// otherwise, the probes' errors follow its error, so that Cause reads them
// too. Reach returns after the probes, and open, have.
func Reach[R any](ctx context.Context, dial DialFunc, addrs []string, tc *tls.Config, sniffTLS bool, open func(context.Context) (R, error)) (R, error) {
	octx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	pctx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := Probe(pctx, dial, a, tc, sniffTLS)
			if err == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			errs[i] = &addrError{addr: a, err: err}
			if definite(err) {
				if failed++; failed == len(addrs) {
					stop(joinErrors(errs))
				}
			}
		}()
	}
	r, err := open(octx)
	if err == nil {
		stopProbes()
		wg.Wait()
		return r, nil
	}
	if cause := context.Cause(octx); octx.Err() != nil && ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		wg.Wait()
		var none R
		return none, cause
	}
	if ctx.Err() == nil {
		// open failed for a reason of its own (credentials, a reply):
		// what the probes find adds nothing.
		stopProbes()
		wg.Wait()
		return r, err
	}
	wg.Wait()
	probes := joinErrors(errs)
	if probes == nil {
		return r, err
	}
	return r, &probedError{err: err, probes: probes}
}

// addrError names the server of a Probe's error.
type addrError struct {
	addr string
	err  error
}

func (e *addrError) Error() string { return e.addr + ": " + e.err.Error() }
func (e *addrError) Unwrap() error { return e.err }

// probedError is a client's error, and what probes of its servers found.
type probedError struct{ err, probes error }

func (e *probedError) Error() string   { return e.err.Error() + " (probe: " + e.probes.Error() + ")" }
func (e *probedError) Unwrap() []error { return []error{e.err, e.probes} }

// lineErrors are errors of several servers, on one line.
type lineErrors []error

// joinErrors returns the non-nil errs as one error, nil when there are none.
func joinErrors(errs []error) error {
	var l lineErrors
	for _, err := range errs {
		if err != nil {
			l = append(l, err)
		}
	}
	if len(l) == 0 {
		return nil
	}
	return l
}

func (l lineErrors) Error() string {
	msgs := make([]string, len(l))
	for i, err := range l {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (l lineErrors) Unwrap() []error { return l }
