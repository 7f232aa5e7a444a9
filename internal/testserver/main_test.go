package testserver

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// servers holds the servers shared by this package's tests (see NewLazy).
var servers Shared

// tracked holds every Process the tests started, for the final check.
var tracked Tracker

func TestMain(m *testing.M) {
	if addr := os.Getenv(pingServerEnv); addr != "" {
		os.Exit(runPingServer(addr))
	}
	code := servers.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
		if err := tracked.AllGone(); err != nil {
			fmt.Fprintf(os.Stderr, "leftover processes: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// pingServerEnv, set to host:port, makes the test binary a ping server on
// that address instead of running the tests: a real server process for the
// tests of Process that needs nothing installed.
const pingServerEnv = "LOCKER_TESTSERVER_PING_ADDR"

// runPingServer answers each line "PING" with "PONG" until killed.
func runPingServer(addr string) int {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ping server:", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "ping server: listening on", addr)
	for {
		conn, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "ping server:", err)
			return 1
		}
		go func() {
			defer conn.Close()
			sc := bufio.NewScanner(conn)
			for sc.Scan() {
				if sc.Text() == "PING" {
					fmt.Fprint(conn, "PONG\n")
				}
			}
		}()
	}
}

// pingServerSpec returns the spec of a ping server on a free port, ready
// when it answers, and its address.
func pingServerSpec(t TB) (ProcessSpec, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("%v", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
	return ProcessSpec{
		Name:  "ping",
		Path:  self,
		Env:   []string{pingServerEnv + "=" + addr},
		Ready: func(ctx context.Context) error { return ping(ctx, addr) },
	}, addr
}

// ping sends PING to the ping server at addr and waits for PONG, for at
// most CallTimeout.
func ping(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	if _, err := fmt.Fprint(conn, "PING\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("ping %s: %w", addr, err)
	}
	if strings.TrimSpace(line) != "PONG" {
		return fmt.Errorf("ping %s: answer %q", addr, line)
	}
	return nil
}

// pingServer is a ping server started for the package's shared servers.
type pingServer struct {
	Addr string
	Proc *Process
}

func startPingServer(t TB) *pingServer {
	t.Helper()
	spec, addr := pingServerSpec(t)
	spec.ReadyTimeout = 30 * time.Second
	return &pingServer{Addr: addr, Proc: StartProcess(t, spec)}
}
