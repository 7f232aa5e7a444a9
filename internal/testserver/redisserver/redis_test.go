package redisserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/golocker/locker/internal/testserver"
)

// unlockScript deletes a lock key only if it still holds the caller's token.
const unlockScript = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`

// redisSmoke sets and gets a key, then takes and releases a lock-shaped key
// with SET NX PX and an owner-checked delete.
func redisSmoke(t *testing.T, c redis.UniversalClient, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := prefix + "{" + t.Name() + "}"
	if err := c.Set(ctx, key+":k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if v, err := c.Get(ctx, key+":k").Result(); err != nil || v != "v" {
		t.Fatalf("GET = %q, %v", v, err)
	}
	lock := key + ":lock"
	if ok, err := c.SetNX(ctx, lock, "owner-1", 10*time.Second).Result(); err != nil || !ok {
		t.Fatalf("first SET NX = %v, %v", ok, err)
	}
	if ok, err := c.SetNX(ctx, lock, "owner-2", 10*time.Second).Result(); err != nil || ok {
		t.Fatalf("second SET NX = %v, %v; want false", ok, err)
	}
	if n, err := c.Eval(ctx, unlockScript, []string{lock}, "owner-2").Int(); err != nil || n != 0 {
		t.Fatalf("unlock by a stranger = %d, %v; want 0", n, err)
	}
	if n, err := c.Eval(ctx, unlockScript, []string{lock}, "owner-1").Int(); err != nil || n != 1 {
		t.Fatalf("unlock by the owner = %d, %v; want 1", n, err)
	}
}

// procsOf returns the processes of the servers this package started.
func procsOf(rs []*RedisServer) []*testserver.Process {
	return testserver.ProcessesOf(rs, func(r *RedisServer) *testserver.Process { return r.Proc })
}

func serverProcs(r *RedisServer) []*testserver.Process { return procsOf([]*RedisServer{r}) }

func clusterProcs(c *RedisClusterServer) []*testserver.Process { return procsOf(c.Nodes) }

func sentinelProcs(s *RedisSentinelServer) []*testserver.Process {
	return procsOf(append(append([]*RedisServer(nil), s.Servers...), s.Sentinels...))
}

func TestRedis(t *testing.T) {
	t.Parallel()

	testserver.RunServer(t, &tracked, "standalone", Redis, serverProcs, func(t *testing.T, srv *RedisServer) {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer c.Close()
		redisSmoke(t, c, "standalone")
		if srv.Proc == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := c.Ping(ctx).Err(); err == nil {
			t.Fatal("PING succeeded on a killed server")
		}
		if err := srv.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING after restart: %v", err)
		}
	})

	testserver.RunServer(t, &tracked, "persistence_survives_restart", func(t testserver.TB) *RedisServer { return RedisWith(t, RedisOptions{Persistence: true}) }, serverProcs, func(t *testing.T, srv *RedisServer) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer c.Close()
		if err := c.Set(ctx, "fence", "42", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := srv.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if v, err := c.Get(ctx, "fence").Result(); err != nil || v != "42" {
			t.Fatalf("GET after restart = %q, %v", v, err)
		}
	})

	testserver.RunServer(t, &tracked, "redlock_instances", func(t testserver.TB) []*RedisServer { return RedisInstances(t, 3) }, procsOf, func(t *testing.T, srvs []*RedisServer) {
		seen := map[string]bool{}
		for i, s := range srvs {
			if seen[s.Addr] {
				t.Fatalf("instance %d repeats address %s", i, s.Addr)
			}
			seen[s.Addr] = true
			c := redis.NewClient(&redis.Options{Addr: s.Addr})
			redisSmoke(t, c, fmt.Sprintf("redlock-%d", i))
			c.Close()
		}
	})

	testserver.RunServer(t, &tracked, "cluster", RedisCluster, clusterProcs, func(t *testing.T, c *RedisClusterServer) {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
		defer cc.Close()
		redisSmoke(t, cc, "cluster")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// The key lives where KeyOwner says: a plain client on that
		// node reads it without a MOVED redirection.
		key := "{orders/42}:lock"
		if err := cc.Set(ctx, key, "owner", 0).Err(); err != nil {
			t.Fatal(err)
		}
		owner, err := c.KeyOwner(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		direct := redis.NewClient(&redis.Options{Addr: owner.Addr})
		defer direct.Close()
		if v, err := direct.Get(ctx, key).Result(); err != nil || v != "owner" {
			t.Fatalf("GET on slot owner %s = %q, %v", owner.Addr, v, err)
		}
	})

	testserver.RunServer(t, &tracked, "cluster_failover", func(t testserver.TB) *RedisClusterServer {
		return RedisClusterWith(t, RedisClusterOptions{ReplicasPerMaster: 1})
	}, clusterProcs, func(t *testing.T, c *RedisClusterServer) {
		if len(c.Nodes) != 6 || c.Nodes[0].Proc == nil {
			t.Skip("needs a cluster started by this package")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		key := "{failover}:k"
		old, err := c.KeyOwner(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := old.Kill(); err != nil {
			t.Fatal(err)
		}
		for {
			owner, err := c.SlotOwner(ctx, KeySlot(key))
			if err == nil && owner != old && c.WaitHealthy(ctx) == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("no failover from %s: %v", old.Addr, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
		defer cc.Close()
		if err := cc.Set(ctx, key, "after-failover", 0).Err(); err != nil {
			t.Fatalf("SET after failover: %v", err)
		}
	})

	testserver.RunServer(t, &tracked, "sentinel_failover", RedisSentinel, sentinelProcs, func(t *testing.T, s *RedisSentinelServer) {
		fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs()})
		defer fc.Close()
		redisSmoke(t, fc, "sentinel")
		if len(s.Servers) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		old, err := s.Master(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if old != s.Servers[0] {
			t.Fatalf("master is %s, want the first server %s", old.Addr, s.Servers[0].Addr)
		}
		begin := time.Now()
		if err := old.Kill(); err != nil {
			t.Fatal(err)
		}
		m, err := s.WaitFailover(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("failover from %s to %s took %v", old.Addr, m.Addr, time.Since(begin).Round(time.Millisecond))
		if m != s.Servers[1] {
			t.Fatalf("new master %s is not the replica %s", m.Addr, s.Servers[1].Addr)
		}
		// The failover client follows the sentinels to the new master.
		for {
			err := fc.Set(ctx, "after-failover", "1", 0).Err()
			if err == nil {
				break
			}
			if ctx.Err() != nil || !isRetryable(err) {
				t.Fatalf("SET after failover: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// isRetryable reports errors a client may see while it moves to a new
// master.
func isRetryable(err error) bool {
	var re redis.Error
	return !errors.As(err, &re) || strings.HasPrefix(re.Error(), "READONLY")
}

// tracked holds the server processes these tests started: TestMain fails
// the run if one of them, or a goroutine, outlived the tests.
var tracked testserver.Tracker

func TestMain(m *testing.M) { os.Exit(tracked.MainChecked(m, func() error { return goleak.Find() })) }
