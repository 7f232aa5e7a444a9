package etcdserver

import (
	"context"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/golocker/locker/internal/testserver"
)

func etcdClient(t *testing.T, s *EtcdServer) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   s.Endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// etcdSmoke puts and gets a key, then takes a lock-shaped key with a Txn
// that creates it only if absent, and deletes it only if still the owner's.
func etcdSmoke(t *testing.T, c *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := "/testserver/" + t.Name()
	if _, err := c.Put(ctx, key+"/k", "v"); err != nil {
		t.Fatalf("put: %v", err)
	}
	if r, err := c.Get(ctx, key+"/k"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("get = %v, %v", r, err)
	}
	lock := key + "/lock"
	acquire := func(owner string) bool {
		t.Helper()
		r, err := c.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(lock), "=", 0)).
			Then(clientv3.OpPut(lock, owner)).
			Commit()
		if err != nil {
			t.Fatalf("acquire txn: %v", err)
		}
		return r.Succeeded
	}
	release := func(owner string) bool {
		t.Helper()
		r, err := c.Txn(ctx).
			If(clientv3.Compare(clientv3.Value(lock), "=", owner)).
			Then(clientv3.OpDelete(lock)).
			Commit()
		if err != nil {
			t.Fatalf("release txn: %v", err)
		}
		return r.Succeeded
	}
	if !acquire("owner-1") || acquire("owner-2") {
		t.Fatal("create-if-absent did not exclude the second owner")
	}
	if release("owner-2") || !release("owner-1") {
		t.Fatal("owner-checked delete did not check the owner")
	}
}

func etcdProcs(s *EtcdServer) []*testserver.Process {
	return testserver.ProcessesOf(s.Members, func(m *EtcdMember) *testserver.Process { return m.Proc })
}

func TestEtcd(t *testing.T) {
	t.Parallel()

	testserver.RunServer(t, &tracked, "single", Etcd, etcdProcs, func(t *testing.T, s *EtcdServer) {
		etcdSmoke(t, etcdClient(t, s))
		if len(s.Members) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if l, err := s.Leader(ctx); err != nil || l != s.Members[0] {
			t.Fatalf("leader = %v, %v", l, err)
		}
	})

	testserver.RunServer(t, &tracked, "cluster_survives_leader_kill", EtcdCluster, etcdProcs, func(t *testing.T, s *EtcdServer) {
		c := etcdClient(t, s)
		etcdSmoke(t, c)
		if len(s.Members) != 3 {
			t.Skip("needs a cluster started by this package")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		old, err := s.WaitLeader(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		if err := old.Kill(); err != nil {
			t.Fatal(err)
		}
		l, err := s.WaitLeader(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("leader moved from %v to %v in %v", old, l, time.Since(begin).Round(time.Millisecond))
		if _, err := c.Put(ctx, "/testserver/after-leader-kill", "1"); err != nil {
			t.Fatalf("put after leader kill: %v", err)
		}
		if err := old.Restart(ctx); err != nil {
			t.Fatalf("restart old leader: %v", err)
		}
		r, err := clientv3.NewKV(c).Get(clientv3.WithRequireLeader(ctx), "/testserver/after-leader-kill")
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("get after restart = %v, %v", r, err)
		}
	})
}

// TestBuildHelper builds the etcdhelper command, or finds it built. make
// helpers runs it before the other tests, so that a first build (half a
// minute of both cores) does not slow the servers of timing-sensitive
// tests that run at the same time.
func TestBuildHelper(t *testing.T) {
	begin := time.Now()
	bin, err := buildEtcdHelper()
	if err != nil {
		testserver.Unavailable(t, "cannot build the etcd helper: %v", err)
	}
	t.Logf("etcd helper %s ready in %v", bin, time.Since(begin).Round(time.Millisecond))
}

// tracked holds the server processes these tests started: TestMain fails
// the run if one of them, or a goroutine, outlived the tests.
var tracked testserver.Tracker

func TestMain(m *testing.M) { os.Exit(tracked.MainChecked(m, func() error { return goleak.Find() })) }
