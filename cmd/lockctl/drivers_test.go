package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/golocker/locker/internal/testserver/etcdserver"
	"github.com/golocker/locker/internal/testserver/mongoserver"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/internal/testserver/sqlserver"
	"github.com/golocker/locker/internal/testserver/zkserver"
)

// TestRunOnEveryDriver runs `lockctl run` and `lockctl list` against a real
// server of every driver and topology: a URL is all it takes to move.
func TestRunOnEveryDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts every server")
	}
	backends := []struct {
		name    string
		url     func(t *testing.T) string
		fencing bool
	}{
		{"redis", func(t *testing.T) string { return "redis://" + redisserver.Redis(t).Addr }, true},
		{"redis+cluster", func(t *testing.T) string {
			return "redis+cluster://" + strings.Join(redisserver.RedisCluster(t).Addrs(), ",")
		}, true},
		{"redis+sentinel", func(t *testing.T) string {
			s := redisserver.RedisSentinel(t)
			return "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/" + s.MasterName
		}, true},
		{"redlock", func(t *testing.T) string {
			var addrs []string
			for _, r := range redisserver.RedisInstances(t, 3) {
				addrs = append(addrs, r.Addr)
			}
			return "redlock://" + strings.Join(addrs, ",")
		}, false},
		{"etcd", func(t *testing.T) string { return "etcd://" + strings.Join(etcdserver.Etcd(t).Endpoints, ",") }, true},
		{"zk", func(t *testing.T) string { return "zk://" + zkserver.ZooKeeper(t).ConnectString() }, true},
		{"mysql", func(t *testing.T) string { return sqlserver.MySQL(t).URL }, true},
		{"postgres", func(t *testing.T) string { return sqlserver.Postgres(t).URL }, true},
		{"sqlite", func(t *testing.T) string { return sqlserver.SQLite(t).URL }, true},
		{"mongodb", func(t *testing.T) string { return mongoserver.Mongo(t).URI }, true},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			u := b.url(t)
			r := lockctl(t, nil, "--url", u, "run", "--wait", "30s", "jobs/"+b.name, "--", "sh", "-c", `echo "$LOCKER_TOKEN"; exit 3`)
			if r.code != 3 {
				t.Fatalf("run: exit %d, want the command's 3; stderr: %s", r.code, r.stderr)
			}
			tok, err := strconv.ParseUint(strings.TrimSpace(r.stdout), 10, 64)
			if err != nil || (tok > 0) != b.fencing {
				t.Errorf("LOCKER_TOKEN = %q; want a positive token: %v", r.stdout, b.fencing)
			}
			if r := lockctl(t, nil, "--url", u, "list", "--json"); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
				t.Errorf("list after the run: exit %d, %q %s; want no holds", r.code, r.stdout, r.stderr)
			}
		})
	}
}
