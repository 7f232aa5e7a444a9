package testserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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

// RedisServer is one Redis server (or sentinel). Proc is nil when the server
// was not started by this package (an environment variable or a container
// named it); the fault hooks then return an error.
type RedisServer struct {
	Addr string   // host:port to dial
	Proc *Process // the server process, nil if not ours
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
func Redis(t TB) *RedisServer {
	t.Helper()
	if addr := EnvAddr(EnvRedisAddr); addr != "" {
		checkEnvServer(t, EnvRedisAddr, addr)
		return &RedisServer{Addr: addr}
	}
	if bin := redisServerPath(); bin != "" {
		return startRedis(t, bin, "redis", RedisOptions{})
	}
	if DockerAvailable() {
		return redisContainer(t)
	}
	Unavailable(t, "no Redis: redis-server not found; %s or set %s", redisInstallHint, EnvRedisAddr)
	return nil
}

// RedisWith starts a standalone redis-server configured by opts. It always
// starts its own server (LOCKER_TEST_REDIS_ADDR is not used, since its
// configuration is unknown).
func RedisWith(t TB, opts RedisOptions) *RedisServer {
	t.Helper()
	bin := redisServerPath()
	if bin == "" {
		Unavailable(t, "no Redis: redis-server not found; %s", redisInstallHint)
		return nil
	}
	return startRedis(t, bin, "redis", opts)
}

// RedisInstances returns n independent standalone Redis servers, as RedLock
// needs: the first n of LOCKER_TEST_REDLOCK_ADDRS, else n redis-servers
// started in parallel.
func RedisInstances(t TB, n int) []*RedisServer {
	t.Helper()
	if addrs := EnvAddrs(EnvRedlockAddrs); len(addrs) > 0 {
		if len(addrs) < n {
			t.Fatalf("testserver: %s names %d servers, the test needs %d", EnvRedlockAddrs, len(addrs), n)
			return nil
		}
		out := make([]*RedisServer, n)
		for i, a := range addrs[:n] {
			checkEnvServer(t, EnvRedlockAddrs, a)
			out[i] = &RedisServer{Addr: a}
		}
		return out
	}
	bin := redisServerPath()
	if bin == "" {
		Unavailable(t, "no Redis for RedLock: redis-server not found; %s or set %s", redisInstallHint, EnvRedlockAddrs)
		return nil
	}
	specs := make([]ProcessSpec, n)
	addrs := make([]string, n)
	for i := range specs {
		specs[i], addrs[i] = redisSpec(t, bin, fmt.Sprintf("redlock-%d", i+1), RedisOptions{})
	}
	procs := StartProcesses(t, specs...)
	out := make([]*RedisServer, n)
	for i, p := range procs {
		out[i] = &RedisServer{Addr: addrs[i], Proc: p}
	}
	return out
}

// Kill kills the server with SIGKILL.
func (s *RedisServer) Kill() error { return s.proc("kill", (*Process).Kill) }

// Stop stops the server with SIGTERM (SIGKILL after 10s).
func (s *RedisServer) Stop() error { return s.proc("stop", (*Process).Stop) }

// Pause freezes the server with SIGSTOP.
func (s *RedisServer) Pause() error { return s.proc("pause", (*Process).Pause) }

// Resume continues a paused server.
func (s *RedisServer) Resume() error { return s.proc("resume", (*Process).Resume) }

// Restart starts the server again on the same port and directory and waits
// until it answers PING.
func (s *RedisServer) Restart(ctx context.Context) error {
	return s.proc("restart", func(p *Process) error { return p.Restart(ctx) })
}

// Do sends one command to the server over a new connection and returns its
// reply: a string, an int64, nil, a []any or an error for a Redis error
// reply. Each call is bounded to 2s (less if ctx ends sooner), so a paused
// server cannot hang it. It is meant for fault hooks and test set-up, not
// for the code under test.
func (s *RedisServer) Do(ctx context.Context, args ...string) (any, error) {
	return redisDo(ctx, s.Addr, args...)
}

func (s *RedisServer) proc(op string, f func(*Process) error) error {
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
	return lookPath([]string{"redis-server"}, "/usr/bin", "/usr/sbin", "/usr/local/bin")
}

func redisCLIPath() string {
	return lookPath([]string{"redis-cli"}, "/usr/bin", "/usr/local/bin")
}

func startRedis(t TB, bin, name string, opts RedisOptions) *RedisServer {
	t.Helper()
	spec, addr := redisSpec(t, bin, name, opts)
	return &RedisServer{Addr: addr, Proc: StartProcess(t, spec)}
}

// redisSpec returns the spec of a redis-server on a free port, ready when
// it answers PING, and its address.
func redisSpec(t TB, bin, name string, opts RedisOptions, extra ...string) (ProcessSpec, string) {
	t.Helper()
	port := FreePort(t)
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
	return ProcessSpec{
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

// checkEnvServer fails the test when a server named by an environment
// variable does not accept connections: the user asked for it, so a skip
// would hide a broken setup.
func checkEnvServer(t TB, env, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := WaitTCP(ctx, addr); err != nil {
		t.Fatalf("testserver: %s=%s: %v", env, addr, err)
	}
}

// redisError is an error reply from Redis.
type redisError string

func (e redisError) Error() string { return "redis: " + string(e) }

// redisDo sends one command over a new connection and reads the reply. It
// speaks just enough RESP2 for set-up and fault hooks, so that this package
// needs no Redis client of its own.
func redisDo(ctx context.Context, addr string, args ...string) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("redis: no command")
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
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
