package redisserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/golocker/locker/internal/testserver"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Environment variables naming Redis servers the user already runs.
const (
	// EnvRedisAddr names a standalone Redis: "127.0.0.1:6390".
	EnvRedisAddr = "LOCKER_TEST_REDIS_ADDR"
	// EnvRedisClusterAddrs names the nodes of a Redis Cluster:
	// "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002".
	EnvRedisClusterAddrs = "LOCKER_TEST_REDIS_CLUSTER_ADDRS"
	// EnvRedisSentinelAddrs names the sentinels of a Sentinel setup:
	// "127.0.0.1:26379,127.0.0.1:26380,127.0.0.1:26381".
	EnvRedisSentinelAddrs = "LOCKER_TEST_REDIS_SENTINEL_ADDRS"
	// EnvRedisSentinelMaster is the master name the sentinels monitor;
	// default "mymaster".
	EnvRedisSentinelMaster = "LOCKER_TEST_REDIS_SENTINEL_MASTER"
	// EnvRedlockAddrs names independent Redis servers for RedLock:
	// "127.0.0.1:6391,127.0.0.1:6392,127.0.0.1:6393".
	EnvRedlockAddrs = "LOCKER_TEST_REDLOCK_ADDRS"
)

const redisInstallHint = "install Debian package redis-server (scripts/install-test-deps.sh)"

// RedisImage is the image used when Redis is started in a container.
const RedisImage = "redis:7.0"

// RedisServer is one Redis server (or sentinel). Proc is nil when the server
// was not started by this package (an environment variable or a container
// named it); the fault hooks then return an error.
type RedisServer struct {
	Addr string              // host:port to dial
	Proc *testserver.Process // the server process, nil if not ours
}

// RedisOptions configures a Redis started by RedisWith.
type RedisOptions struct {
	// Persistence turns on the append-only file with fsync on every write,
	// so that a restarted server keeps its data.
	Persistence bool
	// Args are extra configuration arguments, e.g. "--maxmemory", "10mb".
	Args []string
}

// Redis returns a standalone Redis: the one named by LOCKER_TEST_REDIS_ADDR,
// else a redis-server started on a free loopback port, else a container.
func Redis(t testserver.TB) *RedisServer {
	t.Helper()
	if addr := testserver.EnvAddr(EnvRedisAddr); addr != "" {
		testserver.CheckEnvServer(t, EnvRedisAddr, addr)
		return &RedisServer{Addr: addr}
	}
	if bin := redisServerPath(); bin != "" {
		return startRedis(t, bin, "redis", RedisOptions{})
	}
	if testserver.DockerAvailable() {
		return redisContainer(t)
	}
	testserver.Unavailable(t, "no Redis: redis-server not found; %s or set %s", redisInstallHint, EnvRedisAddr)
	return nil
}

// RedisWith starts a standalone redis-server configured by opts. It always
// starts its own server (LOCKER_TEST_REDIS_ADDR is not used, since its
// configuration is unknown).
func RedisWith(t testserver.TB, opts RedisOptions) *RedisServer {
	t.Helper()
	bin := redisServerPath()
	if bin == "" {
		testserver.Unavailable(t, "no Redis: redis-server not found; %s", redisInstallHint)
		return nil
	}
	return startRedis(t, bin, "redis", opts)
}

// RedisInstances returns n independent standalone Redis servers, as RedLock
// needs: the first n of LOCKER_TEST_REDLOCK_ADDRS, else n redis-servers
// started in parallel.
func RedisInstances(t testserver.TB, n int) []*RedisServer {
	t.Helper()
	if addrs := testserver.EnvAddrs(EnvRedlockAddrs); len(addrs) > 0 {
		if len(addrs) < n {
			t.Fatalf("testserver: %s names %d servers, the test needs %d", EnvRedlockAddrs, len(addrs), n)
			return nil
		}
		return envServers(t, EnvRedlockAddrs, addrs[:n])
	}
	bin := redisServerPath()
	if bin == "" {
		testserver.Unavailable(t, "no Redis for RedLock: redis-server not found; %s or set %s", redisInstallHint, EnvRedlockAddrs)
		return nil
	}
	specs := make([]testserver.ProcessSpec, n)
	addrs := make([]string, n)
	for i := range specs {
		specs[i], addrs[i] = redisSpec(t, bin, fmt.Sprintf("redlock-%d", i+1), RedisOptions{})
	}
	procs := testserver.StartProcesses(t, specs...)
	out := make([]*RedisServer, n)
	for i, p := range procs {
		out[i] = &RedisServer{Addr: addrs[i], Proc: p}
	}
	return out
}

// Kill kills the server with SIGKILL.
func (s *RedisServer) Kill() error { return s.proc("kill", (*testserver.Process).Kill) }

// Stop stops the server with SIGTERM (SIGKILL after 10s).
func (s *RedisServer) Stop() error { return s.proc("stop", (*testserver.Process).Stop) }

// Pause freezes the server with SIGSTOP.
func (s *RedisServer) Pause() error { return s.proc("pause", (*testserver.Process).Pause) }

// Resume continues a paused server.
func (s *RedisServer) Resume() error { return s.proc("resume", (*testserver.Process).Resume) }

// Restart starts the server again on the same port and directory and waits
// until it answers PING.
func (s *RedisServer) Restart(ctx context.Context) error {
	return s.proc("restart", func(p *testserver.Process) error { return p.Restart(ctx) })
}

// Do sends one command to the server over a new connection and returns its
// reply: a string, an int64, nil, a []any or an error for a Redis error
// reply. Each call is bounded to 2s (less if ctx ends sooner), so a paused
// server cannot hang it. It is meant for fault hooks and test set-up, not
// for the code under test.
func (s *RedisServer) Do(ctx context.Context, args ...string) (any, error) {
	return redisDo(ctx, s.Addr, args...)
}

func (s *RedisServer) proc(op string, f func(*testserver.Process) error) error {
	if s == nil || s.Proc == nil {
		return fmt.Errorf("testserver: cannot %s Redis %s: not started by this package", op, s.addrOrNil())
	}
	return f(s.Proc)
}

func (s *RedisServer) addrOrNil() string {
	if s == nil {
		return "<nil>"
	}
	return s.Addr
}

func redisServerPath() string {
	return testserver.LookPath([]string{"redis-server"}, "/usr/bin", "/usr/sbin", "/usr/local/bin")
}

func redisCLIPath() string {
	return testserver.LookPath([]string{"redis-cli"}, "/usr/bin", "/usr/local/bin")
}

func startRedis(t testserver.TB, bin, name string, opts RedisOptions) *RedisServer {
	t.Helper()
	spec, addr := redisSpec(t, bin, name, opts)
	return &RedisServer{Addr: addr, Proc: testserver.StartProcess(t, spec)}
}

// redisSpec returns the spec of a redis-server on a free port, ready when
// it answers PING, and its address.
func redisSpec(t testserver.TB, bin, name string, opts RedisOptions, extra ...string) (testserver.ProcessSpec, string) {
	t.Helper()
	port := testserver.FreePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	dir := t.TempDir()
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", "",
		"--save", "",
		// A replica's first sync would otherwise wait 5s for more replicas.
		"--repl-diskless-sync-delay", "0",
	}
	if opts.Persistence {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	args = append(args, extra...)
	args = append(args, opts.Args...)
	return testserver.ProcessSpec{
		Name: name,
		Path: bin,
		Args: args,
		Dir:  dir,
		Ready: func(ctx context.Context) error {
			return redisPing(ctx, addr)
		},
		ReadyTimeout: 30 * time.Second,
	}, addr
}

func redisPing(ctx context.Context, addr string) error {
	r, err := redisDo(ctx, addr, "PING")
	if err != nil {
		return err
	}
	if r != "PONG" {
		return fmt.Errorf("redis %s: PING answered %v", addr, r)
	}
	return nil
}

// redisError is an error reply from Redis.
type redisError string

func (e redisError) Error() string { return "redis: " + string(e) }

// redisDo is Do within testserver.CallTimeout, for set-up and fault hooks.
func redisDo(ctx context.Context, addr string, args ...string) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, testserver.CallTimeout)
	defer cancel()
	return Do(ctx, addr, args...)
}

// Do sends one command to addr over a new connection, within ctx, and
// returns the reply: a string, an int64, nil or a []any; an error reply is
// an error. It speaks just enough RESP2 for set-up, fault hooks and the
// benchmarks' INFO and FLUSHALL, so that no Redis client is needed — and
// none sends a handshake command that INFO commandstats would count.
func Do(ctx context.Context, addr string, args ...string) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("redis: no command")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(deadline); err != nil {
			return nil, err
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return nil, err
	}
	reply, err := readRESP(bufio.NewReader(conn), 0)
	if err != nil {
		return nil, fmt.Errorf("redis %s %s: %w", addr, args[0], err)
	}
	if e, ok := reply.(redisError); ok {
		return nil, e
	}
	return reply, nil
}

func readRESP(r *bufio.Reader, depth int) (any, error) {
	if depth > 8 {
		return nil, errors.New("reply nested too deeply")
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return redisError(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		if n > 1<<16 {
			return nil, fmt.Errorf("array of %d elements is too long", n)
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readRESP(r, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected reply %q", line)
}

// redisInfo returns the fields of INFO section as a map.
func redisInfo(ctx context.Context, addr, section string) (map[string]string, error) {
	r, err := redisDo(ctx, addr, "INFO", section)
	if err != nil {
		return nil, err
	}
	return parseInfo(r)
}

// parseInfo parses "key:value" lines, as INFO and CLUSTER INFO return.
func parseInfo(reply any) (map[string]string, error) {
	s, ok := reply.(string)
	if !ok {
		return nil, fmt.Errorf("unexpected reply %T", reply)
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

func redisContainer(t testserver.TB) *RedisServer {
	t.Helper()
	addr := testserver.StartContainer(t, testserver.ContainerSpec{
		Image:   RedisImage,
		Port:    "6379/tcp",
		Cmd:     []string{"redis-server", "--save", "", "--appendonly", "no"},
		WaitLog: "Ready to accept connections",
	})
	if addr == "" {
		return nil
	}
	return &RedisServer{Addr: addr}
}

// addrsOf returns the addresses of rs.
func addrsOf(rs []*RedisServer) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Addr
	}
	return out
}

// envServers returns the servers at addrs, which env names, once each
// accepts connections.
func envServers(t testserver.TB, env string, addrs []string) []*RedisServer {
	t.Helper()
	testserver.CheckEnvServers(t, env, addrs)
	out := make([]*RedisServer, len(addrs))
	for i, a := range addrs {
		out[i] = &RedisServer{Addr: a}
	}
	return out
}
