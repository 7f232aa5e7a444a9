package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/etcdserver"
	"github.com/golocker/locker/internal/testserver/mongoserver"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/internal/testserver/sqlserver"
	"github.com/golocker/locker/internal/testserver/zkserver"
)

// topology is one backend's servers as the run uses them.
type topology struct {
	// upstreams are the server addresses the workers' connections go to
	// through a proxy each, so that the network faults can hit one worker;
	// nil when the client finds its servers itself (Sentinel and Cluster
	// hand out the primaries' addresses) or there is no network (SQLite).
	upstreams []string
	// url returns the backend's URL with addrs (the proxies, in the order
	// of upstreams) in place of the servers.
	url func(addrs []string) string
	// serverFault is the kind of server fault the backend gets (fRestart,
	// fLeader, fFailover), "" for none.
	serverFault string
	// perName is set when the server fault hits the given name only (the
	// Cluster master of its slot), not every name.
	perName bool
	// inject starts the server fault and returns the function that ends
	// it (restarts what was killed) and a note naming what was hit.
	inject func(ctx context.Context, name string) (undo func(context.Context) error, note string, err error)
}

// backendSpec names a backend and starts its servers.
type backendSpec struct {
	name  string
	about string
	start func(t testserver.TB, ttl time.Duration) *topology
}

var backends = []backendSpec{
	{"redis", "Redis standalone, AOF with fsync always (a restart keeps the holds and the fence counters)", startRedis},
	{"redis-sentinel", "Redis master + replica + 3 sentinels; the master is killed (failover)", startSentinel},
	{"redis-cluster", "Redis Cluster, 3 masters with a replica each; the lock's master is killed (failover)", startCluster},
	{"etcd", "etcd, 3 members; the leader is killed and restarted", startEtcd},
	{"zk", "ZooKeeper, 3 servers; the leader is killed and restarted", startZK},
	{"postgres", "PostgreSQL; the server is killed and restarted", startPostgres},
	{"postgres-shared", "PostgreSQL with shared leases (shared_lease=true); the server is killed and restarted", startPostgresShared},
	{"mariadb", "MariaDB; the server is killed and restarted", startMariaDB},
	{"sqlite", "SQLite file shared by the worker processes (no server, no network faults)", startSQLite},
	{"mongo", "MongoDB API (FerretDB on SQLite where there is no mongod); the server is killed and restarted", startMongo},
}

// restartable is the part of the test servers' processes a restart fault
// needs.
type restartable interface {
	Kill() error
	Restart(ctx context.Context) error
}

// killRestart is a topology's inject for a single server s: it kills s,
// and its undo restarts s.
func killRestart(s restartable, note string) func(ctx context.Context, name string) (func(context.Context) error, string, error) {
	return killAndRecover(func(context.Context, string) (restartable, error) { return s, nil },
		func(restartable) string { return note },
		func(ctx context.Context, s restartable) error { return s.Restart(ctx) })
}

// killAndRecover is a topology's inject that kills the server find picks
// for the lock name (the leader, the master), named by note; its undo is
// recover, which restarts that server and waits for what the backend
// needs (a failover, a healthy cluster).
func killAndRecover[S restartable](find func(ctx context.Context, name string) (S, error), note func(S) string, recover func(context.Context, S) error) func(ctx context.Context, name string) (func(context.Context) error, string, error) {
	return func(ctx context.Context, name string) (func(context.Context) error, string, error) {
		s, err := find(ctx, name)
		if err != nil {
			return nil, "", err
		}
		if err := s.Kill(); err != nil {
			return nil, "", err
		}
		return func(ctx context.Context) error { return recover(ctx, s) }, note(s), nil
	}
}

func startRedis(t testserver.TB, _ time.Duration) *topology {
	s := redisserver.RedisWith(t, redisserver.RedisOptions{Persistence: true})
	return &topology{
		upstreams:   []string{s.Addr},
		url:         func(a []string) string { return "redis://" + a[0] },
		serverFault: fRestart,
		inject:      killRestart(s, "redis-server"),
	}
}

func startSentinel(t testserver.TB, _ time.Duration) *topology {
	s := redisserver.RedisSentinel(t)
	requireOwn(t, len(s.Servers), "the sentinels", "be failed over")
	return &topology{
		url: func([]string) string {
			return "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/" + s.MasterName
		},
		serverFault: fFailover,
		inject: killAndRecover(func(ctx context.Context, _ string) (*redisserver.RedisServer, error) { return s.Master(ctx) },
			masterNote,
			func(ctx context.Context, old *redisserver.RedisServer) error {
				_, ferr := s.WaitFailover(ctx, old)
				return errors.Join(ferr, old.Restart(ctx))
			}),
	}
}

func startCluster(t testserver.TB, _ time.Duration) *topology {
	c := redisserver.RedisClusterWith(t, redisserver.RedisClusterOptions{ReplicasPerMaster: 1})
	return &topology{
		url:         func([]string) string { return "redis+cluster://" + strings.Join(c.Addrs(), ",") },
		serverFault: fFailover,
		perName:     true,
		inject: func(ctx context.Context, name string) (func(context.Context) error, string, error) {
			// The driver's key for name (redislock/internal/keys): the default
			// prefix and the name as the hash tag.
			key := "golocker:{" + name + "}"
			return killAndRecover(func(ctx context.Context, _ string) (*redisserver.RedisServer, error) { return c.KeyOwner(ctx, key) },
				masterNote,
				func(ctx context.Context, m *redisserver.RedisServer) error {
					// The replica takes over after cluster-node-timeout;
					// the old master comes back as its replica.
					err := pollUntil(ctx, func() error {
						n, err := c.KeyOwner(ctx, key)
						if err == nil && n == m {
							err = errors.New("no failover yet")
						}
						return err
					})
					return errors.Join(err, m.Restart(ctx), c.WaitHealthy(ctx))
				})(ctx, name)
		},
	}
}

func startEtcd(t testserver.TB, ttl time.Duration) *topology {
	e := etcdserver.EtcdCluster(t)
	requireOwn(t, len(e.Members), "an etcd", "have its leader killed")
	return &topology{
		upstreams: e.Endpoints,
		url: func(a []string) string {
			return fmt.Sprintf("etcd://%s/chaos?session_ttl=%ds", strings.Join(a, ","), int(ttl.Seconds()))
		},
		serverFault: fLeader,
		inject: killAndRecover(func(ctx context.Context, _ string) (*etcdserver.EtcdMember, error) { return e.Leader(ctx) },
			func(l *etcdserver.EtcdMember) string { return l.Name },
			func(ctx context.Context, l *etcdserver.EtcdMember) error {
				_, err := e.WaitLeader(ctx, l)
				return errors.Join(err, l.Restart(ctx))
			}),
	}
}

func startZK(t testserver.TB, ttl time.Duration) *topology {
	z := zkserver.ZooKeeperEnsemble(t)
	requireOwn(t, len(z.Nodes), "a ZooKeeper", "have its leader killed")
	return &topology{
		upstreams: z.Addrs,
		url: func(a []string) string {
			return fmt.Sprintf("zk://%s/chaos?session_timeout=%s", strings.Join(a, ","), ttl)
		},
		serverFault: fLeader,
		inject: killAndRecover(func(ctx context.Context, _ string) (*zkserver.ZooKeeperNode, error) { return z.Leader(ctx) },
			(*zkserver.ZooKeeperNode).String,
			func(ctx context.Context, l *zkserver.ZooKeeperNode) error {
				return errors.Join(l.Restart(ctx), z.WaitServing(ctx))
			}),
	}
}

func sqlTopology(db *sqlserver.SQLDatabase) *topology {
	return restartTopology(db.Server, db.Server.Proc != nil, db.Server.Addr, db.URL, db.Dialect)
}

// restartTopology is one server at addr, reached at rawURL (with a proxy's
// address as its host), that the server fault kills and restarts. A server
// that is not our own (the environment named it) gets neither proxy nor
// server fault.
func restartTopology(s restartable, own bool, addr, rawURL, note string) *topology {
	if !own {
		return &topology{url: func([]string) string { return rawURL }}
	}
	return &topology{
		upstreams:   []string{addr},
		url:         func(a []string) string { return withHost(rawURL, a[0]) },
		serverFault: fRestart,
		inject:      killRestart(s, note),
	}
}

func startPostgres(t testserver.TB, _ time.Duration) *topology {
	return sqlTopology(sqlserver.Postgres(t))
}

// startPostgresShared is startPostgres with the holds of each worker on
// one shared lease (mysqllock.WithSharedLease): a paused or cut-off worker's
// lease must be deleted before its lock is taken.
func startPostgresShared(t testserver.TB, ttl time.Duration) *topology {
	top := startPostgres(t, ttl)
	base := top.url
	top.url = func(a []string) string { return withQuery(base(a), "shared_lease", "true") }
	return top
}

func startMariaDB(t testserver.TB, _ time.Duration) *topology { return sqlTopology(sqlserver.MySQL(t)) }

func startSQLite(t testserver.TB, _ time.Duration) *topology {
	db := sqlserver.SQLite(t)
	return &topology{url: func([]string) string { return db.URL }}
}

func startMongo(t testserver.TB, _ time.Duration) *topology {
	db := mongoserver.Mongo(t)
	return restartTopology(db.Server, db.Server.Proc != nil, db.Server.Addr, db.URI, "mongo")
}

// requireOwn fails the run when the topology has no servers of its own
// (n is 0): servers that the environment named, what, cannot fault.
func requireOwn(t testserver.TB, n int, what, fault string) {
	t.Helper()
	if n == 0 {
		t.Fatalf("chaos: %s named by the environment cannot %s", what, fault)
	}
}

// masterNote names a Redis master that a fault killed.
func masterNote(m *redisserver.RedisServer) string { return "master " + m.Addr }

// withHost returns raw with its host:port replaced by addr.
func withHost(raw, addr string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Host = addr
	return u.String()
}

// withQuery returns raw with the query parameter k=v added.
func withQuery(raw, k, v string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}

// pollUntil calls f every 50 ms until it returns nil or ctx ends.
func pollUntil(ctx context.Context, f func() error) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}
