package drivertest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/testserver"
)

// ConnectCase is a URL that Open cannot connect with, and what its error
// says.
type ConnectCase struct {
	Name string
	URL  string
	// Want is what the error says (any one of them: a cause may show in
	// the client's words or in driverkit's).
	Want []string
	// Is, if set, is an error that the error must match.
	Is error
	// Deadline, if set, is the deadline of Open's ctx; else Open gets
	// context.Background() and must return within the bound.
	Deadline time.Duration
	// Password, if set, is a password of the URL that the error must not
	// show, beside ConnectErrors's.
	Password string
}

// connectSlack is how much later than its bound Open may return: the
// measured overrun is a few milliseconds, and a loaded machine (2 cores,
// builds beside the tests) can delay a goroutine by a second or more.
const connectSlack = 3 * time.Second

// ConnectErrors opens each case's URL, in parallel, and fails t unless Open
// fails within bound (or the case's deadline) plus a slack, with an error
// that says the case's Want and does not show pw. It logs each error and
// how long Open took.
func ConnectErrors[D backend.Driver, O any](t *testing.T, bound time.Duration, pw string, open func(context.Context, string, ...O) (D, error), cases []ConnectCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			ctx, limit := context.Background(), bound
			if c.Deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.Deadline)
				defer cancel()
				limit = c.Deadline
			}
			start := time.Now()
			d, err := open(ctx, c.URL)
			took := time.Since(start)
			if err == nil {
				_ = d.Close()
				t.Fatalf("Open(%s) succeeded", locker.Redact(c.URL))
			}
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
			if took > limit+connectSlack {
				t.Errorf("Open took %v, want at most %v (+ %v slack)", took, limit, connectSlack)
			}
			for _, p := range []string{pw, c.Password} {
				if p != "" && strings.Contains(err.Error(), p) {
					t.Errorf("the error shows the password: %v", err)
				}
			}
			said := false
			for _, w := range c.Want {
				said = said || strings.Contains(err.Error(), w)
			}
			if !said {
				t.Errorf("the error does not say %q: %v", c.Want, err)
			}
			if c.Is != nil && !errors.Is(err, c.Is) {
				t.Errorf("the error does not match %v: %v", c.Is, err)
			}
		})
	}
}

// ClosedPort returns a loopback address where nothing listens.
func ClosedPort(t testing.TB) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(testserver.FreePort(t)))
}

// UnknownHost is a host name that no DNS resolves (RFC 2606's .invalid).
const UnknownHost = "no-such-host.invalid"

// TLSServer returns the address of a TLS server on loopback, with a
// certificate of its own, that completes handshakes and then closes the
// connection; a client without TLS finds it closing the connection. It
// stops when t ends.
func TLSServer(t testing.TB) string {
	t.Helper()
	cert := selfSigned(t)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, l, func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_ = c.(*tls.Conn).Handshake()
	})
}

// SilentServer returns the address of a server on loopback that accepts
// connections and never answers. It stops when t ends.
func SilentServer(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, l, func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		buf := make([]byte, 512)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	})
}

// serve accepts connections on l, each handled by handle and then closed,
// until t ends.
func serve(t testing.TB, l net.Listener, handle func(net.Conn)) string {
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns, stopped := map[net.Conn]bool{}, false
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if stopped {
				mu.Unlock()
				_ = c.Close()
				continue
			}
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				handle(c)
				_ = c.Close()
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		stopped = true
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// selfSigned returns a certificate for 127.0.0.1 and localhost, signed by
// itself.
func selfSigned(t testing.TB) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "golocker test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
