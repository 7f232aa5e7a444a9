package redisserver

import (
	"context"
	"errors"
	"fmt"
	"github.com/golocker/locker/internal/testserver"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// DefaultSentinelMaster is the master name of the Sentinel setups this
// package starts, and the default of LOCKER_TEST_REDIS_SENTINEL_MASTER.
const DefaultSentinelMaster = "mymaster"

// Sentinel timing of the setups this package starts: a master is deemed
// down after SentinelDownAfter, so a failover completes in a few seconds. A
// failover whose sentinel election fails is retried after twice the
// failover timeout.
const (
	SentinelDownAfter       = time.Second
	sentinelFailoverTimeout = 2 * time.Second
)

// RedisSentinelServer is a Redis master with replicas, watched by
// sentinels.
type RedisSentinelServer struct {
	// MasterName is the name the sentinels know the master by.
	MasterName string
	// Sentinels are the sentinels (3 when started here, quorum 2).
	Sentinels []*RedisServer
	// Servers are the data servers; Servers[0] was started as the master,
	// the others as its replicas. Empty when environment variables named
	// the sentinels.
	Servers []*RedisServer
}

// RedisSentinel returns a Sentinel setup: the sentinels named by
// LOCKER_TEST_REDIS_SENTINEL_ADDRS (master name from
// LOCKER_TEST_REDIS_SENTINEL_MASTER), else a master, one replica and three
// sentinels (quorum 2) started on free loopback ports. It returns once the
// replica is in sync and every sentinel knows the replica and the other
// sentinels, so that a failover can start at once.
func RedisSentinel(t testserver.TB) *RedisSentinelServer {
	t.Helper()
	if addrs := testserver.EnvAddrs(EnvRedisSentinelAddrs); len(addrs) > 0 {
		s := &RedisSentinelServer{MasterName: testserver.EnvAddr(EnvRedisSentinelMaster)}
		if s.MasterName == "" {
			s.MasterName = DefaultSentinelMaster
		}
		s.Sentinels = envServers(t, EnvRedisSentinelAddrs, addrs)
		return s
	}
	bin := redisServerPath()
	if bin == "" {
		testserver.Unavailable(t, "no Redis Sentinel: redis-server not found; %s or set %s", redisInstallHint, EnvRedisSentinelAddrs)
		return nil
	}
	s := &RedisSentinelServer{MasterName: DefaultSentinelMaster}

	masterSpec, masterAddr := redisSpec(t, bin, "sentinel-master", RedisOptions{})
	host, masterPort := splitAddr(masterAddr)
	replicaSpec, replicaAddr := redisSpec(t, bin, "sentinel-replica", RedisOptions{}, "--replicaof", host, masterPort)
	// The sentinels learn of the replica from the master's INFO, which they
	// read on connecting and then only every 10s: start them once the
	// replica is in sync.
	replicaSpec.Ready = func(ctx context.Context) error { return replicaInSync(ctx, replicaAddr) }
	procs := testserver.StartProcesses(t, masterSpec, replicaSpec)
	s.Servers = []*RedisServer{{Addr: masterAddr, Proc: procs[0]}, {Addr: replicaAddr, Proc: procs[1]}}

	specs := make([]testserver.ProcessSpec, 3)
	addrs := make([]string, 3)
	for i := range specs {
		port := testserver.FreePort(t)
		dir := t.TempDir()
		conf := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
daemonize no
logfile ""
dir %s
sentinel resolve-hostnames no
sentinel monitor %[3]s %[4]s %[5]s 2
sentinel down-after-milliseconds %[3]s %[6]d
sentinel failover-timeout %[3]s %[7]d
sentinel parallel-syncs %[3]s 1
`, port, dir, s.MasterName, host, masterPort,
			SentinelDownAfter.Milliseconds(), sentinelFailoverTimeout.Milliseconds())
		confPath := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
			t.Fatalf("testserver: %v", err)
			return nil
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		addrs[i] = addr
		specs[i] = testserver.ProcessSpec{
			Name:         fmt.Sprintf("sentinel-%d", i+1),
			Path:         bin,
			Args:         []string{confPath, "--sentinel"},
			Dir:          dir,
			Ready:        func(ctx context.Context) error { return redisPing(ctx, addr) },
			ReadyTimeout: 30 * time.Second,
		}
	}
	for i, p := range testserver.StartProcesses(t, specs...) {
		s.Sentinels = append(s.Sentinels, &RedisServer{Addr: addrs[i], Proc: p})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatalf("testserver: %v", err)
		return nil
	}
	return s
}

func splitAddr(addr string) (host, port string) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:]
		}
	}
	return addr, ""
}

func replicaInSync(ctx context.Context, addr string) error {
	info, err := redisInfo(ctx, addr, "replication")
	if err != nil {
		return err
	}
	if info["master_link_status"] != "up" {
		return fmt.Errorf("replica %s: master link %s", addr, info["master_link_status"])
	}
	return nil
}

// SentinelAddrs returns the sentinels' addresses.
func (s *RedisSentinelServer) SentinelAddrs() []string { return addrsOf(s.Sentinels) }

// WaitReady waits until every running sentinel sees the master up, with all
// running replicas and all other running sentinels.
func (s *RedisSentinelServer) WaitReady(ctx context.Context) error {
	return testserver.WaitFor(ctx, 50*time.Millisecond, "redis sentinel not ready", s.ready)
}

func (s *RedisSentinelServer) ready(ctx context.Context) error {
	running := func(rs []*RedisServer) (out []*RedisServer) {
		for _, r := range rs {
			if r.Proc == nil || r.Proc.Running() {
				out = append(out, r)
			}
		}
		return out
	}
	sentinels, servers := running(s.Sentinels), running(s.Servers)
	for _, r := range servers {
		info, err := redisInfo(ctx, r.Addr, "replication")
		if err != nil {
			return err
		}
		if info["role"] == "slave" && info["master_link_status"] != "up" {
			return fmt.Errorf("replica %s: master link %s", r.Addr, info["master_link_status"])
		}
	}
	for _, sn := range sentinels {
		r, err := sn.Do(ctx, "SENTINEL", "MASTER", s.MasterName)
		if err != nil {
			return err
		}
		m := pairs(r)
		if m["flags"] != "master" {
			return fmt.Errorf("sentinel %s: master flags %q", sn.Addr, m["flags"])
		}
		if len(servers) > 0 && m["num-slaves"] != strconv.Itoa(len(servers)-1) {
			return fmt.Errorf("sentinel %s knows %s replicas", sn.Addr, m["num-slaves"])
		}
		if m["num-other-sentinels"] != strconv.Itoa(len(sentinels)-1) {
			return fmt.Errorf("sentinel %s knows %s other sentinels", sn.Addr, m["num-other-sentinels"])
		}
	}
	return nil
}

// pairs turns a flat [field, value, ...] reply into a map.
func pairs(reply any) map[string]string {
	m := map[string]string{}
	a, _ := reply.([]any)
	for i := 0; i+1 < len(a); i += 2 {
		k, _ := a[i].(string)
		v, _ := a[i+1].(string)
		m[k] = v
	}
	return m
}

// Master returns the current master as the first answering sentinel names
// it: one of Servers when started here, else a RedisServer without Proc.
func (s *RedisSentinelServer) Master(ctx context.Context) (*RedisServer, error) {
	var last error = errors.New("no running sentinel")
	for _, sn := range s.Sentinels {
		if sn.Proc != nil && !sn.Proc.Running() {
			continue
		}
		r, err := sn.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.MasterName)
		if err != nil {
			last = err
			continue
		}
		a, _ := r.([]any)
		if len(a) != 2 {
			last = fmt.Errorf("sentinel %s does not know master %q", sn.Addr, s.MasterName)
			continue
		}
		host, _ := a[0].(string)
		port, _ := a[1].(string)
		addr := host + ":" + port
		for _, srv := range s.Servers {
			if srv.Addr == addr {
				return srv, nil
			}
		}
		return &RedisServer{Addr: addr}, nil
	}
	return nil, fmt.Errorf("sentinel master %s: %w", s.MasterName, last)
}

// WaitFailover polls until the sentinels name a master other than old and
// that server reports itself a master, or ctx ends.
func (s *RedisSentinelServer) WaitFailover(ctx context.Context, old *RedisServer) (*RedisServer, error) {
	m, err := testserver.PollFor(ctx, 50*time.Millisecond, func(ctx context.Context) (*RedisServer, error) {
		m, err := s.Master(ctx)
		if err != nil {
			return nil, err
		}
		if m.Addr == old.Addr {
			return nil, fmt.Errorf("master is still %s", old.Addr)
		}
		info, err := redisInfo(ctx, m.Addr, "replication")
		if err != nil {
			return nil, err
		}
		if info["role"] != "master" {
			return nil, fmt.Errorf("new master %s has role %s", m.Addr, info["role"])
		}
		return m, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for failover from %s: %w", old.Addr, err)
	}
	return m, nil
}
