package lockadmin

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/golocker/locker/internal/drivertest"
)

func TestNeedsAuth(t *testing.T) {
	for _, tt := range []struct {
		addr string
		need bool
	}{
		{"127.0.0.1:8080", false},
		{"127.1.2.3:8080", false},
		{"localhost:8080", false},
		{"[::1]:8080", false},
		{":8080", true},
		{"0.0.0.0:8080", true},
		{"[::]:8080", true},
		{"10.0.0.5:8080", true},
		{"admin.example.com:8080", true},
		{"localhost.example.com:8080", true},
	} {
		need, err := NeedsAuth(tt.addr)
		if err != nil || need != tt.need {
			t.Errorf("NeedsAuth(%q) = %v, %v; want %v", tt.addr, need, err, tt.need)
		}
	}
	if _, err := NeedsAuth("8080"); err == nil {
		t.Error("NeedsAuth(\"8080\") took an address without a host part")
	}
}

func TestListenAndServeRefusesAnOpenAddressWithoutAuth(t *testing.T) {
	h := newHandler(t, newClient(t))
	for _, addr := range []string{":0", "0.0.0.0:0", "192.0.2.1:0", "example.com:0"} {
		err := ListenAndServe(context.Background(), addr, h)
		if !errors.Is(err, ErrNoAuth) {
			t.Errorf("ListenAndServe(%q) = %v, want ErrNoAuth", addr, err)
		}
	}
}

// fakeListener is a listener that claims a non-loopback address.
type fakeListener struct {
	net.Listener
	addr net.Addr
}

func (l fakeListener) Addr() net.Addr { return l.addr }

func TestServeChecksTheBoundAddress(t *testing.T) {
	c := newClient(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := fakeListener{Listener: ln, addr: &net.TCPAddr{IP: net.IPv4zero, Port: 8080}}
	if err := Serve(context.Background(), fake, newHandler(t, c)); !errors.Is(err, ErrNoAuth) {
		t.Fatalf("Serve on 0.0.0.0 without auth = %v, want ErrNoAuth", err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Error("the refused listener was left open")
	}

	// With authentication the same address is served.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake = fakeListener{Listener: ln, addr: &net.TCPAddr{IP: net.IPv4zero, Port: 8080}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, fake, newHandler(t, c, WithBearerToken(testToken))) }()
	resp := get(t, "http://"+ln.Addr().String()+"/api/holds", testToken)
	if resp != http.StatusOK {
		t.Errorf("GET api/holds: %d", resp)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after ctx ended = %v, want nil", err)
	}
}

func TestServeShutsDownWhenCtxEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, newHandler(t, newClient(t))) }()
	if code := get(t, "http://"+ln.Addr().String()+"/", ""); code != http.StatusOK {
		t.Errorf("GET /: %d", code)
	}
	cancel()
	drivertest.Succeeds(t, done, 10*time.Second, "Serve after ctx ended (a graceful shutdown)")
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("the address still accepts connections after the shutdown")
	}
}

// get fetches url with a bearer token (if any) and returns the status.
func get(t *testing.T, url, token string) int {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
