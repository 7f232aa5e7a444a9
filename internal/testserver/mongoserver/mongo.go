package mongoserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/golocker/locker/internal/testserver"
)

// EnvMongoURI names a MongoDB server the user already runs:
// "mongodb://127.0.0.1:27018/?replicaSet=rs0". Its path, if any, is
// replaced by each test's own database.
const EnvMongoURI = "LOCKER_TEST_MONGO_URI"

// MongoImage is the image used when MongoDB is started in a container.
const MongoImage = "mongo:7.0"

const mongoInstallHint = "install mongod (MongoDB is not in Debian), or put a Go toolchain on PATH so that FerretDB can be built"

// dropTimeout bounds the drop of a test's database.
const dropTimeout = 15 * time.Second

// mongoReplicaSet is the replica set name of the mongod this package starts.
const mongoReplicaSet = "rs0"

// MongoServer is a MongoDB-compatible server. Tests get their own database
// on it with NewDatabase, so a package can share one server across tests
// through Shared and Lazy.
//
// Proc is nil when this package did not start the server (an environment
// variable or a container named it); the fault hooks then return an error.
type MongoServer struct {
	URI        string              // mongodb:// URI without a database, for mongo.Connect
	Addr       string              // host:port of the server
	ReplicaSet string              // the replica set name, "" when not a replica set
	Proc       *testserver.Process // the server process, nil if not ours

	// FerretDB is true when the server is FerretDB (on SQLite) rather than
	// mongod. FerretDB has no TTL indexes, change streams, transactions or
	// replica set; tests of those must skip when it is set.
	FerretDB bool
}

// MongoDatabase is one database of its own for a test on a MongoServer. It
// is dropped when the test that created it ends.
type MongoDatabase struct {
	Server *MongoServer
	Name   string // the database name
	URI    string // the server's URI with Name as its path, as golocker's mongodb:// URLs take it
}

// Mongo returns a fresh database on a MongoDB server started for this test
// (or named by LOCKER_TEST_MONGO_URI). Use StartMongo and NewDatabase to
// share one server across tests.
func Mongo(t testserver.TB) *MongoDatabase {
	t.Helper()
	return testserver.NewDatabaseOn(t, StartMongo)
}

// StartMongo returns a MongoDB-compatible server: the one named by
// LOCKER_TEST_MONGO_URI; else mongod from PATH, started on a free loopback
// port as a single-node replica set and ready once it is primary; else
// FerretDB with its SQLite backend, built from the helper module in the
// directory ferretdb next to this file on first use and cached; else a
// container running mongod; else it skips (or fails, with
// LOCKER_REQUIRE_SERVERS=1).
func StartMongo(t testserver.TB) *MongoServer {
	t.Helper()
	if v := testserver.EnvAddr(EnvMongoURI); v != "" {
		return mongoFromEnv(t, v)
	}
	if bin := mongodPath(); bin != "" {
		return startMongod(t, bin)
	}
	if testserver.GoTool() != "" {
		return startFerretDB(t)
	}
	if testserver.DockerAvailable() {
		return mongoContainer(t)
	}
	testserver.Unavailable(t, "no MongoDB: mongod not found and no go command to build FerretDB; %s, or set %s", mongoInstallHint, EnvMongoURI)
	return nil
}

func mongodPath() string {
	return testserver.LookPath([]string{"mongod"}, "/usr/bin", "/usr/local/bin")
}

// NewDatabase picks a database name of its own for t and registers a
// cleanup that drops the database when t ends. MongoDB creates the database
// on its first write.
func (s *MongoServer) NewDatabase(t testserver.TB) *MongoDatabase {
	t.Helper()
	name := testserver.UniqueDBName(t)
	u, err := url.Parse(s.URI)
	if err != nil {
		t.Fatalf("testserver: mongo: bad server URI") // the error would quote the password
		return nil
	}
	u.Path = "/" + name
	t.Cleanup(func() {
		if s.Proc != nil && !s.Proc.Running() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		defer cancel()
		err := withMongo(ctx, s.URI, func(ctx context.Context, c *mongo.Client) error {
			return c.Database(name).Drop(ctx)
		})
		if err != nil {
			t.Logf("testserver: mongo: drop database %s: %v", name, err)
		}
	})
	return &MongoDatabase{Server: s, Name: name, URI: u.String()}
}

// Kill kills the server with SIGKILL.
func (s *MongoServer) Kill() error { return s.proc("kill", (*testserver.Process).Kill) }

// Stop stops the server with SIGTERM (SIGKILL after 10s).
func (s *MongoServer) Stop() error { return s.proc("stop", (*testserver.Process).Stop) }

// Pause freezes the server with SIGSTOP and returns once it has stopped.
func (s *MongoServer) Pause() error {
	return s.proc("pause", func(p *testserver.Process) error {
		if err := p.Pause(); err != nil {
			return err
		}
		return testserver.WaitStopped([]int{p.Pid()}, 5*time.Second)
	})
}

// Resume continues a paused server.
func (s *MongoServer) Resume() error { return s.proc("resume", (*testserver.Process).Resume) }

// Restart starts the server again on the same port and data directory and
// waits until it answers (for mongod, until it is primary again).
func (s *MongoServer) Restart(ctx context.Context) error {
	return s.proc("restart", func(p *testserver.Process) error { return p.Restart(ctx) })
}

func (s *MongoServer) proc(op string, f func(*testserver.Process) error) error {
	if s == nil || s.Proc == nil {
		return fmt.Errorf("testserver: cannot %s MongoDB server: not started by this package", op)
	}
	return f(s.Proc)
}

func mongoFromEnv(t testserver.TB, v string) *MongoServer {
	t.Helper()
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "mongodb" && u.Scheme != "mongodb+srv") {
		t.Fatalf("testserver: %s: not a mongodb:// URI", EnvMongoURI)
		return nil
	}
	q := u.Query()
	if u.User != nil && !q.Has("authSource") {
		// The driver authenticates against the URI's database; keep it
		// so once NewDatabase puts each test's database there.
		db := strings.TrimPrefix(u.Path, "/")
		if db == "" {
			db = "admin"
		}
		q.Set("authSource", db)
		u.RawQuery = q.Encode()
	}
	u.Path = "/"
	s := &MongoServer{URI: u.String(), Addr: u.Host, ReplicaSet: q.Get("replicaSet")}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mongoPing(ctx, s.URI); err != nil {
		t.Fatalf("testserver: %s: server at %s: %v", EnvMongoURI, u.Host, err)
		return nil
	}
	return s
}

// startMongod starts mongod as a single-node replica set whose one member
// is 127.0.0.1:PORT, so the driver's replica set discovery works as it
// would in production.
func startMongod(t testserver.TB, bin string) *MongoServer {
	t.Helper()
	dir := t.TempDir()
	port := testserver.FreePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	proc := testserver.StartProcess(t, testserver.ProcessSpec{
		Name: "mongod",
		Path: bin,
		Args: []string{
			"--port", strconv.Itoa(port), "--bind_ip", "127.0.0.1",
			"--dbpath", dir, "--replSet", mongoReplicaSet,
			"--nounixsocket", "--quiet", "--oplogSize", "64",
			"--wiredTigerCacheSizeGB", "0.25",
			"--setParameter", "diagnosticDataCollectionEnabled=false",
		},
		Dir:          dir,
		ReadyTimeout: 90 * time.Second,
		Ready: func(ctx context.Context) error {
			return mongoPrimary(ctx, addr, []bson.M{{"_id": 0, "host": addr}})
		},
	})
	if proc == nil {
		return nil
	}
	return &MongoServer{
		URI:        "mongodb://" + addr + "/?replicaSet=" + mongoReplicaSet,
		Addr:       addr,
		ReplicaSet: mongoReplicaSet,
		Proc:       proc,
	}
}

// mongoContainer runs mongod as a single-node replica set whose member is
// named as the container sees itself; clients therefore connect directly.
func mongoContainer(t testserver.TB) *MongoServer {
	t.Helper()
	addr := testserver.StartContainer(t, testserver.ContainerSpec{
		Image:   MongoImage,
		Port:    "27017/tcp",
		Cmd:     []string{"mongod", "--replSet", mongoReplicaSet, "--bind_ip_all"},
		WaitLog: "Waiting for connections",
	})
	if addr == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := testserver.PollUntil(ctx, func(ctx context.Context) error {
		return mongoPrimary(ctx, addr, []bson.M{{"_id": 0, "host": "localhost:27017"}})
	})
	if err != nil {
		t.Fatalf("testserver: mongo container at %s: %v", addr, err)
		return nil
	}
	return &MongoServer{URI: "mongodb://" + addr + "/?directConnection=true", Addr: addr, ReplicaSet: mongoReplicaSet}
}

// mongoPrimary returns nil when the mongod at addr is the writable primary
// of its replica set. Until the set is initiated it initiates it with the
// given members, and reports not ready; the caller polls.
func mongoPrimary(ctx context.Context, addr string, members []bson.M) error {
	return withMongo(ctx, "mongodb://"+addr+"/?directConnection=true", func(ctx context.Context, c *mongo.Client) error {
		var hello struct {
			IsWritablePrimary bool   `bson:"isWritablePrimary"`
			SetName           string `bson:"setName"`
		}
		admin := c.Database("admin")
		if err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
			return err
		}
		if hello.IsWritablePrimary {
			return nil
		}
		if hello.SetName == "" {
			cfg := bson.M{"_id": mongoReplicaSet, "members": members}
			err := admin.RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: cfg}}).Err()
			var ce mongo.CommandError
			if err != nil && !(errors.As(err, &ce) && ce.Name == "AlreadyInitialized") {
				return fmt.Errorf("replSetInitiate: %w", err)
			}
		}
		return errors.New("not yet primary of replica set " + mongoReplicaSet)
	})
}

// mongoPing returns nil when the server at uri answers a ping.
func mongoPing(ctx context.Context, uri string) error {
	return withMongo(ctx, uri, func(ctx context.Context, c *mongo.Client) error {
		return c.Ping(ctx, readpref.Primary())
	})
}

// withMongo connects a client to uri, calls f and disconnects the client.
// When the server does not accept TCP connections yet it fails at once:
// the driver would wait for its next heartbeat, half a second later.
func withMongo(ctx context.Context, uri string, f func(context.Context, *mongo.Client) error) error {
	if u, err := url.Parse(uri); err == nil && u.Scheme == "mongodb" && u.Port() != "" && !strings.Contains(u.Host, ",") {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return err
		}
		conn.Close()
	}
	opts := options.Client().ApplyURI(uri).
		SetServerSelectionTimeout(2 * time.Second).
		SetConnectTimeout(2 * time.Second)
	c, err := mongo.Connect(opts)
	if err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = c.Disconnect(dctx)
	}()
	return f(ctx, c)
}
