package mysqllock_test

import (
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/mysqllock"
)

// TestOpenConnectErrors opens mysql:// and postgres:// URLs that cannot
// connect, each with a context without deadline, and checks that Open
// fails within DefaultOpenTimeout and says why. The test servers have no
// TLS, so no case has a plaintext client meet a TLS MySQL or PostgreSQL
// (a postgres:// URL meets a TLS server of the test's own instead).
func TestOpenConnectErrors(t *testing.T) {
	t.Parallel()
	my, pg := newDatabase(t, mysqllock.DialectMySQL), newDatabase(t, mysqllock.DialectPostgres)
	myURL, pgURL := drivertest.URL(t, my.URL), drivertest.URL(t, pg.URL)
	myPW, _ := myURL.User.Password()
	pgPW, _ := pgURL.User.Password()
	with := func(u *url.URL, host, password, query string) string {
		c := *u
		if host != "" {
			c.Host = host
		}
		if password != "" {
			c.User = url.UserPassword(u.User.Username(), password)
		}
		if query != "" {
			c.RawQuery = query
		}
		return c.String()
	}
	refused, silent := drivertest.ClosedPort(t), drivertest.SilentServer(t)
	cases := []drivertest.ConnectCase{
		{Name: "mysql refused", URL: with(myURL, refused, "", ""), Want: []string{"connection refused"}, Is: syscall.ECONNREFUSED},
		{Name: "mysql unknown host", URL: with(myURL, net.JoinHostPort(drivertest.UnknownHost, "3306"), "", ""), Want: []string{"unknown host"}},
		{Name: "mysql TLS against a plaintext server", URL: with(myURL, "", "", "tls=true"), Want: []string{"not support TLS", "does not speak TLS", "certificate"}},
		{Name: "mysql wrong password", URL: with(myURL, "", "wrong-"+myPW, ""), Want: []string{"authentication failed"}},
		{Name: "mysql silent server", URL: with(myURL, silent, "", ""), Want: []string{"no answer"}},
		{Name: "postgres refused", URL: with(pgURL, refused, "", ""), Want: []string{"connection refused"}, Is: syscall.ECONNREFUSED},
		{Name: "postgres unknown host", URL: with(pgURL, net.JoinHostPort(drivertest.UnknownHost, "5432"), "", ""), Want: []string{"unknown host"}},
		{Name: "postgres TLS against a plaintext server", URL: with(pgURL, "", "", "sslmode=require"), Want: []string{"does not speak TLS"}},
		{Name: "postgres plaintext against a TLS server", URL: with(pgURL, drivertest.TLSServer(t), "", ""), Want: []string{"may expect TLS"}},
		{Name: "postgres wrong password", URL: with(pgURL, "", "wrong-"+pgPW, ""), Want: []string{"authentication failed"}},
		{Name: "postgres silent server, ctx deadline", URL: with(pgURL, silent, "", ""), Want: []string{"deadline exceeded"}, Deadline: mysqllock.DefaultOpenTimeout / 5},
	}
	for i := range cases {
		cases[i].Password = pgPW
	}
	drivertest.ConnectErrors(t, mysqllock.DefaultOpenTimeout, myPW, mysqllock.Open, cases)
}
