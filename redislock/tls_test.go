package redislock_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/redislock"
)

// TestTLS runs a lock over rediss:// against a redis-server that serves
// TLS and requires client certificates, all signed by a CA made here.
func TestTLS(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, time.Minute)
	dir := t.TempDir()
	ca, caKey := newCert(t, dir, "ca", nil, nil)
	newCert(t, dir, "server", ca, caKey)
	newCert(t, dir, "client", ca, caKey)
	port := strconv.Itoa(testserver.FreePort(t))
	redisserver.RedisWith(t, redisserver.RedisOptions{Args: []string{
		"--tls-port", port,
		"--tls-cert-file", filepath.Join(dir, "server.pem"),
		"--tls-key-file", filepath.Join(dir, "server-key.pem"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"),
		"--tls-auth-clients", "yes",
	}})
	base := "rediss://" + net.JoinHostPort("127.0.0.1", port)
	withCA := base + "?tls_ca_file=" + filepath.Join(dir, "ca.pem")
	withClient := withCA + "&tls_cert_file=" + filepath.Join(dir, "client.pem") + "&tls_key_file=" + filepath.Join(dir, "client-key.pem")

	c := openClient(t, withClient)
	m := c.NewMutex("tls")
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock over TLS: %v", err)
	}
	if m.Token() == 0 {
		t.Error("no fencing token over TLS")
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		base + "?dial_timeout=1s",   // the server's CA is unknown
		withCA + "&dial_timeout=1s", // no client certificate
	} {
		octx, cancel := context.WithTimeout(ctx, 2*time.Second)
		d, err := redislock.Open(octx, bad)
		cancel()
		if err == nil {
			_ = d.Close()
			t.Errorf("Open(%s) succeeded", bad)
		}
	}
}

// newCert writes name.pem and name-key.pem in dir: a CA when parent is
// nil, else a certificate for 127.0.0.1 signed by parent.
func newCert(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "golocker test " + name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(file, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(name+".pem", "CERTIFICATE", der)
	write(name+"-key.pem", "EC PRIVATE KEY", keyDER)
	return cert, key
}
