package redislock_test

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/redislock"
)

// TestOpenConnectErrors opens URLs that cannot connect, each with a
// context without deadline, and checks that Open fails within
// DefaultOpenTimeout and says why.
func TestOpenConnectErrors(t *testing.T) {
	t.Parallel()
	pw := testserver.RandomHex(12)
	plain := standalone.Get(t).Addr
	// The password is set once the server runs: testserver's readiness
	// check does not log in.
	withPassword := redisserver.RedisWith(t, redisserver.RedisOptions{}).Addr
	ctx := drivertest.Context(t, time.Minute)
	if _, err := redisserver.Do(ctx, withPassword, "CONFIG", "SET", "requirepass", pw); err != nil {
		t.Fatal(err)
	}
	refused, refused2, refused3 := drivertest.ClosedPort(t), drivertest.ClosedPort(t), drivertest.ClosedPort(t)
	unknown := net.JoinHostPort(drivertest.UnknownHost, "6379")
	silent := drivertest.SilentServer(t)
	drivertest.ConnectErrors(t, redislock.DefaultOpenTimeout, pw, redislock.Open, []drivertest.ConnectCase{
		{Name: "refused", URL: "redis://" + refused, Want: []string{"connection refused"}, Is: syscall.ECONNREFUSED},
		{Name: "unknown host", URL: "redis://" + unknown, Want: []string{"unknown host"}},
		{Name: "TLS against a plaintext server", URL: "rediss://" + plain, Want: []string{"TLS"}},
		{Name: "plaintext against a TLS server", URL: "redis://" + drivertest.TLSServer(t), Want: []string{"may expect TLS"}},
		{Name: "wrong password", URL: "redis://:wrong-" + pw + "@" + withPassword, Want: []string{"authentication failed"}},
		{Name: "no password", URL: "redis://" + withPassword, Want: []string{"authentication failed"}},
		{Name: "silent server", URL: "redis://" + silent, Want: []string{"no answer", "deadline exceeded"}},
		{Name: "silent server, ctx deadline", URL: "redis://" + silent, Want: []string{"deadline exceeded"}, Deadline: redislock.DefaultOpenTimeout / 5},
		{Name: "sentinel refused", URL: "redis+sentinel://" + refused + "/mymaster", Want: []string{"connection refused"}},
		{Name: "cluster refused", URL: "redis+cluster://" + refused, Want: []string{"connection refused"}},
		{Name: "redlock refused", URL: "redlock://" + refused + "," + refused2 + "," + refused3, Want: []string{"connection refused"}},
	})
}

// TestOpenHidesThePassword opens URLs with a password that fail in every
// way, through locker.Open and through Open (package redlock's for redlock://).
func TestOpenHidesThePassword(t *testing.T) {
	t.Parallel()
	const pw = "s3cr3t-pw"
	// A second each: go-redis would retry dialling for seconds.
	drivertest.OpenFailures(t, pw, time.Second, redislock.Open,
		"redis://u:"+pw+"@127.0.0.1:1/0?dial_timeout=100ms", // nothing listens on port 1
		"redis://u:"+pw+"@127.0.0.1:1/0?unknown=1",          // a bad parameter
		"redis://u:"+pw+"@127.0.0.1:1/x",                    // a bad database
		"redis+sentinel://:"+pw+"@127.0.0.1:1/m?dial_timeout=100ms&sentinel_password="+pw,
		"redis+cluster://u:"+pw+"@127.0.0.1:1?dial_timeout=100ms",
		"redlock://u:"+pw+"@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?dial_timeout=100ms",
		"rediss://u:"+pw+"@127.0.0.1:1?tls_ca_file=/nonexistent",
		"redis://u:"+pw+"@127.0.0.1:1?sentinel_password="+pw,
	)
}
