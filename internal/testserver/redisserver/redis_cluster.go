package redisserver

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/golocker/locker/internal/keyslot"
	"github.com/golocker/locker/internal/testserver"
)

// RedisClusterServer is a Redis Cluster.
type RedisClusterServer struct {
	// Nodes are the cluster's nodes; with replicas, the first three were
	// created as masters. Their Proc is nil when LOCKER_TEST_REDIS_CLUSTER_ADDRS
	// named them.
	Nodes []*RedisServer
}

// RedisClusterOptions configures a cluster started by RedisClusterWith.
type RedisClusterOptions struct {
	// Masters is the number of masters; default 3, the least Redis accepts.
	Masters int
	// ReplicasPerMaster adds that many replicas to each master, so that a
	// master's failure is followed by a failover (cluster-node-timeout is
	// 1s).
	ReplicasPerMaster int
}

// RedisCluster returns a Redis Cluster of 3 masters without replicas: the
// one named by LOCKER_TEST_REDIS_CLUSTER_ADDRS, else one started from
// redis-server and redis-cli on free loopback ports.
func RedisCluster(t testserver.TB) *RedisClusterServer {
	t.Helper()
	return RedisClusterWith(t, RedisClusterOptions{})
}

// RedisClusterWith is RedisCluster with options. An environment-named
// cluster is used only when opts asks for no replicas.
func RedisClusterWith(t testserver.TB, opts RedisClusterOptions) *RedisClusterServer {
	t.Helper()
	if opts.Masters <= 0 {
		opts.Masters = 3
	}
	if addrs := testserver.EnvAddrs(EnvRedisClusterAddrs); len(addrs) > 0 && opts.ReplicasPerMaster == 0 {
		return &RedisClusterServer{Nodes: envServers(t, EnvRedisClusterAddrs, addrs)}
	}
	bin, cli := redisServerPath(), redisCLIPath()
	if bin == "" || cli == "" {
		testserver.Unavailable(t, "no Redis Cluster: redis-server or redis-cli not found; %s or set %s", redisInstallHint, EnvRedisClusterAddrs)
		return nil
	}
	n := opts.Masters * (1 + opts.ReplicasPerMaster)
	specs := make([]testserver.ProcessSpec, n)
	addrs := make([]string, n)
	for i := range specs {
		busPort := testserver.FreePort(t)
		specs[i], addrs[i] = redisSpec(t, bin, fmt.Sprintf("redis-cluster-%d", i+1), RedisOptions{},
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(busPort),
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "1000",
			"--cluster-replica-validity-factor", "0",
		)
	}
	procs := testserver.StartProcesses(t, specs...)
	c := &RedisClusterServer{}
	for i, p := range procs {
		c.Nodes = append(c.Nodes, &RedisServer{Addr: addrs[i], Proc: p})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(opts.ReplicasPerMaster), "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("testserver: redis-cli --cluster create: %v\n%s", err, out)
		return nil
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("testserver: %v\nredis-cli said:\n%s", err, out)
		return nil
	}
	return c
}

// Addrs returns the addresses of all nodes.
func (c *RedisClusterServer) Addrs() []string { return addrsOf(c.Nodes) }

// WaitHealthy waits until every running node reports cluster_state:ok with
// all 16384 slots served and knows every other node.
func (c *RedisClusterServer) WaitHealthy(ctx context.Context) error {
	return testserver.WaitFor(ctx, 50*time.Millisecond, "redis cluster not healthy", c.healthy)
}

func (c *RedisClusterServer) healthy(ctx context.Context) error {
	for _, n := range c.Nodes {
		if n.Proc != nil && !n.Proc.Running() {
			continue
		}
		r, err := n.Do(ctx, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		info, err := parseInfo(r)
		if err != nil {
			return err
		}
		if info["cluster_state"] != "ok" || info["cluster_slots_ok"] != "16384" {
			return fmt.Errorf("node %s: cluster_state=%s cluster_slots_ok=%s", n.Addr, info["cluster_state"], info["cluster_slots_ok"])
		}
		if info["cluster_known_nodes"] != strconv.Itoa(len(c.Nodes)) {
			return fmt.Errorf("node %s knows %s nodes of %d", n.Addr, info["cluster_known_nodes"], len(c.Nodes))
		}
	}
	return nil
}

// KeySlot returns the hash slot of key, as CLUSTER KEYSLOT computes it
// (honouring {hash tags}).
func KeySlot(key string) int { return int(keyslot.Of(key)) }

// SlotOwner returns the node that serves slot as master, asking the running
// nodes with CLUSTER SLOTS in turn.
func (c *RedisClusterServer) SlotOwner(ctx context.Context, slot int) (*RedisServer, error) {
	var last error
	for _, n := range c.Nodes {
		if n.Proc != nil && !n.Proc.Running() {
			continue
		}
		r, err := n.Do(ctx, "CLUSTER", "SLOTS")
		if err != nil {
			last = err
			continue
		}
		addr, err := slotMaster(r, slot)
		if err != nil {
			last = fmt.Errorf("node %s: %w", n.Addr, err)
			continue
		}
		for _, m := range c.Nodes {
			if m.Addr == addr {
				return m, nil
			}
		}
		return &RedisServer{Addr: addr}, nil
	}
	if last == nil {
		last = fmt.Errorf("no running node")
	}
	return nil, fmt.Errorf("owner of slot %d: %w", slot, last)
}

// KeyOwner returns the master node that serves key.
func (c *RedisClusterServer) KeyOwner(ctx context.Context, key string) (*RedisServer, error) {
	return c.SlotOwner(ctx, KeySlot(key))
}

// slotMaster finds slot in a CLUSTER SLOTS reply: an array of
// [start, end, [ip, port, id, ...] (the master), replicas...].
func slotMaster(reply any, slot int) (string, error) {
	ranges, ok := reply.([]any)
	if !ok {
		return "", fmt.Errorf("unexpected CLUSTER SLOTS reply %T", reply)
	}
	for _, r := range ranges {
		e, ok := r.([]any)
		if !ok || len(e) < 3 {
			continue
		}
		start, ok1 := e[0].(int64)
		end, ok2 := e[1].(int64)
		master, ok3 := e[2].([]any)
		if !ok1 || !ok2 || !ok3 || len(master) < 2 || int64(slot) < start || int64(slot) > end {
			continue
		}
		host, _ := master[0].(string)
		port, _ := master[1].(int64)
		if host == "" {
			host = "127.0.0.1"
		}
		return fmt.Sprintf("%s:%d", host, port), nil
	}
	return "", fmt.Errorf("slot %d is not served", slot)
}
