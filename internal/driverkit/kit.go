package driverkit

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/golocker/locker/backend"
)

// DialFunc dials a connection to a store's server: every driver takes one
// (WithDialer), so that tests can route connections through
// conformance.FaultNet, and users through a proxy.
type DialFunc = func(ctx context.Context, network, address string) (net.Conn, error)

// BadURL returns an error of driver pkg ("redislock") that wraps
// backend.ErrBadURL: "redislock: bad URL: <detail>".
func BadURL(pkg, format string, args ...any) error {
	return &kitError{pkg: pkg, kind: backend.ErrBadURL, msg: fmt.Sprintf(format, args...)}
}

// BadOption returns an error of driver pkg that wraps
// backend.ErrInvalidOption: "redislock: invalid option: <detail>".
func BadOption(pkg, format string, args ...any) error {
	return &kitError{pkg: pkg, kind: backend.ErrInvalidOption, msg: fmt.Sprintf(format, args...)}
}

type kitError struct {
	pkg  string
	kind *backend.Error
	msg  string
}

func (e *kitError) Error() string { return e.pkg + ": " + e.kind.Text() + ": " + e.msg }
func (e *kitError) Unwrap() error { return e.kind }

// Apply applies opts, in order, to o; nil options are skipped. It returns
// the first error.
func Apply[T any, O ~func(*T) error](o *T, opts []O) error {
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(o); err != nil {
			return err
		}
	}
	return nil
}

// Grace returns a context for clean-up after ctx ended (a release after a
// cancelled acquisition): not cancelled with ctx, bounded by d.
func Grace(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// TLSParams are the TLS settings of a URL's query (tls_server_name,
// tls_insecure_skip_verify, tls_ca_file, tls_cert_file, tls_key_file).
type TLSParams struct {
	ServerName         string
	InsecureSkipVerify bool
	CAFile             string
	CertFile, KeyFile  string
}

// TLSParamNames are the query parameters TLSParams reads.
var TLSParamNames = []string{"tls_server_name", "tls_insecure_skip_verify", "tls_ca_file", "tls_cert_file", "tls_key_file"}

// Config returns the *tls.Config the settings describe. Errors name the
// file or setting at fault.
func (p TLSParams) Config() (*tls.Config, error) {
	cfg := &tls.Config{ServerName: p.ServerName, InsecureSkipVerify: p.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
	if p.CAFile != "" {
		pem, err := os.ReadFile(p.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls_ca_file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls_ca_file %s: no PEM certificate in it", p.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (p.CertFile == "") != (p.KeyFile == "") {
		return nil, fmt.Errorf("tls_cert_file and tls_key_file go together")
	}
	if p.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls_cert_file/tls_key_file: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Escape percent-encodes, in name, '%' and each byte of special, so that
// names map one to one onto keys or paths in which those bytes mean
// something.
func Escape(name, special string) string {
	if !strings.ContainsAny(name, "%"+special) {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '%' || strings.IndexByte(special, c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Unescape undoes Escape(s, special): it decodes %XX for '%' and each byte
// of special, and reports false for any other escape (not a name Escape
// wrote).
func Unescape(s, special string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		c := byte(v)
		if err != nil || s[i+1:i+3] != fmt.Sprintf("%02X", c) || c != '%' && strings.IndexByte(special, c) < 0 {
			return "", false
		}
		b.WriteByte(c)
		i += 2
	}
	return b.String(), true
}
