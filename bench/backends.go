package bench

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	_ "github.com/golocker/locker/etcdlock"  // etcd://
	_ "github.com/golocker/locker/mongolock" // mongodb://
	_ "github.com/golocker/locker/mysqllock" // mysql://, postgres://, sqlite://
	_ "github.com/golocker/locker/zklock"    // zk://
)

// Backends other than Redis. The Redis benchmarks (Configs, Scenario.Run)
// stay as they are; these run in this process only (no procs=4 scenario).
const (
	Redis    = "redis"
	Etcd     = "etcd"
	ZK       = "zk"
	MySQL    = "mysql"
	Postgres = "postgres"
	SQLite   = "sqlite"
	Mongo    = "mongo"
)

// AllBackends lists every backend, Redis first.
var AllBackends = []string{Redis, Etcd, ZK, MySQL, Postgres, SQLite, Mongo}

// ParseBackends expands a comma-separated list of backends: "sql" means
// mysql, postgres and sqlite; "all" every backend. Unknown names are an
// error.
func ParseBackends(list string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, b := range strings.Split(list, ",") {
		switch b = strings.TrimSpace(strings.ToLower(b)); b {
		case "":
		case "all":
			for _, x := range AllBackends {
				out[x] = true
			}
		case "sql":
			out[MySQL], out[Postgres], out[SQLite] = true, true, true
		case "mongodb", "ferretdb":
			out[Mongo] = true
		case "zookeeper":
			out[ZK] = true
		default:
			found := false
			for _, x := range AllBackends {
				found = found || x == b
			}
			if !found {
				return nil, fmt.Errorf("unknown backend %q (want one of %v, sql or all)", b, AllBackends)
			}
			out[b] = true
		}
	}
	return out, nil
}

// BackendContendedHandles are the handle counts of the contended
// scenarios of each backend other than Redis.
var BackendContendedHandles = map[string][]int{
	Etcd: {8, 32}, ZK: {8, 32},
	MySQL: {8, 32}, Postgres: {8, 32}, SQLite: {8, 32}, Mongo: {8, 32},
}

// BackendMinDuration is the shortest contended run of a backend whatever
// -contended.duration says. Fairness (Jain's index) needs a few
// acquisitions per handle: FerretDB hands the lock on 5–12 times a second
// here, so 3 s would give 32 handles fewer acquisitions than handles.
var BackendMinDuration = map[string]time.Duration{Mongo: 20 * time.Second}

// Stock recipes the golocker configurations are compared with.
const (
	EtcdMutex = "etcd-concurrency" // go.etcd.io/etcd/client/v3/concurrency.Mutex
	ZKLock    = "zk-lock"          // github.com/go-zookeeper/zk.Lock
)

// BackendConfigs returns the configurations of a backend other than Redis.
// Their Open takes the backend's target: comma-separated endpoints for etcd
// and ZooKeeper, golocker's URL for SQL and MongoDB. For every golocker-X
// configuration a stock recipe, if there is one, has a configuration whose
// name ends in -X: the same sharing of connections. On PostgreSQL and
// MySQL the peer is the database's own lock (NativeLocks), with a
// connection per handle: the peer of golocker-own.
func BackendConfigs(backend string) []Config {
	cs := []Config{
		{Name: "golocker-own", Library: Golocker, Open: openGolockerURL(backend, false)},
		{Name: "golocker-shared", Library: Golocker, Open: openGolockerURL(backend, true)},
	}
	switch backend {
	case Etcd:
		cs = append(cs,
			Config{Name: EtcdMutex + "-own", Library: EtcdMutex, Open: openEtcdMutex(false)},
			Config{Name: EtcdMutex + "-shared", Library: EtcdMutex, Open: openEtcdMutex(true)})
	case ZK:
		cs = append(cs,
			Config{Name: ZKLock + "-own", Library: ZKLock, Open: openZKLock(false)},
			Config{Name: ZKLock + "-shared", Library: ZKLock, Open: openZKLock(true)})
	case Postgres:
		cs = append(cs, Config{Name: PGAdvisory + "-own", Library: PGAdvisory, Open: openPGAdvisory})
	case MySQL:
		cs = append(cs, Config{Name: MySQLGetLock + "-own", Library: MySQLGetLock, Open: openMySQLGetLock})
	}
	return cs
}

// golockerURL is the URL locker.Open takes for a backend's target, for a
// run on lock name.
//
// On MongoDB each lock name gets a collection of its own. Where no mongod
// is installed the tests' MongoDB is FerretDB 1.x on SQLite, which looks a
// document up by _id with a scan of the whole collection (its query,
// _ferretdb_sjson->'$._id', is not the expression of its _id index), and
// mongolock's history mode adds two or three documents per acquisition:
// in one collection every run would be slower than the one before
// (uncontended p50 15, 34, 59, 87 ms over four passes of 300 pairs). The
// collection's name is that of the run: the lock's name and when the run
// opened its handles (the passes of -count use the same lock name).
func golockerURL(backend, target, name string) string {
	switch backend {
	case Etcd:
		return "etcd://" + target + "/golocker-bench"
	case ZK:
		return "zk://" + target + "/golocker-bench"
	case Mongo:
		h := fnv.New64a()
		h.Write([]byte(name + "@" + time.Now().Format(time.RFC3339Nano)))
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		return target + sep + "collection=bench_" + strconv.FormatUint(h.Sum64(), 16)
	}
	return target // the SQL targets are golocker's URLs already
}

// openGolockerURL opens golocker on a backend with default options: one
// Client per handle or one Client for every handle.
func openGolockerURL(backend string, shared bool) func(ctx context.Context, target, name string, n int, _ time.Duration) (*Set, error) {
	return openGolockerAt(shared, func(target, name string) string { return golockerURL(backend, target, name) })
}

// openEtcdMutex opens etcd's own recipe: one concurrency.Session (default
// TTL 60s) and one concurrency.Mutex per handle, on one etcd client per
// handle (own) or one client for every handle (shared).
func openEtcdMutex(shared bool) func(ctx context.Context, target, name string, n int, _ time.Duration) (*Set, error) {
	return func(ctx context.Context, target, name string, n int, _ time.Duration) (*Set, error) {
		return openSet(n, shared, func() (*clientv3.Client, func() error, error) {
			cli, err := clientv3.New(clientv3.Config{
				Endpoints:   strings.Split(target, ","),
				DialTimeout: 5 * time.Second,
				Logger:      zap.NewNop(),
				Context:     context.WithoutCancel(ctx),
			})
			if err != nil {
				return nil, nil, err
			}
			return cli, cli.Close, nil
		}, func(s *Set, cli *clientv3.Client) error {
			sess, err := concurrency.NewSession(cli, concurrency.WithContext(context.WithoutCancel(ctx)))
			if err != nil {
				return err
			}
			s.closers = append(s.closers, sess.Close)
			s.Handles = append(s.Handles, etcdMutexHandle{concurrency.NewMutex(sess, "/bench-stock/"+name)})
			return nil
		})
	}
}

type etcdMutexHandle struct{ m *concurrency.Mutex }

func (h etcdMutexHandle) Lock(ctx context.Context) error   { return h.m.Lock(ctx) }
func (h etcdMutexHandle) Unlock(ctx context.Context) error { return h.m.Unlock(ctx) }

// zkSessionTimeout is the session timeout the stock ZooKeeper recipe asks
// for (golocker's default is 10s too).
const zkSessionTimeout = 10 * time.Second

type zkNopLogger struct{}

func (zkNopLogger) Printf(string, ...any) {}

// openZKLock opens go-zookeeper's recipe, zk.NewLock(conn, path,
// zk.WorldACL(zk.PermAll)), one per handle, on one connection per handle
// (own) or one for every handle (shared).
func openZKLock(shared bool) func(ctx context.Context, target, name string, n int, _ time.Duration) (*Set, error) {
	return func(ctx context.Context, target, name string, n int, _ time.Duration) (*Set, error) {
		path := "/bench-stock/" + strings.ReplaceAll(name, "/", "_")
		s, err := openSet(n, shared, func() (*zk.Conn, func() error, error) {
			conn, _, err := zk.Connect(strings.Split(target, ","), zkSessionTimeout, zk.WithLogger(zkNopLogger{}))
			if err != nil {
				return nil, nil, err
			}
			return conn, func() error { conn.Close(); return nil }, nil
		}, func(s *Set, conn *zk.Conn) error {
			s.Handles = append(s.Handles, &zkLockHandle{l: zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))})
			return nil
		})
		if err != nil {
			return nil, err
		}
		// The closers run in reverse order: wait for the abandoned Locks
		// after the connections are closed (which ends them).
		s.closers = append([]func() error{s.waitAbandoned}, s.closers...)
		return s, nil
	}
}

// zkLockHandle runs zk.Lock, which takes no ctx, in a goroutine: when ctx
// ends first, Lock returns ctx's error and the goroutine, still waiting,
// releases the lock as soon as it gets it (or fails when Close closes the
// connection).
type zkLockHandle struct {
	l *zk.Lock
}

// abandoned counts the zk.Lock calls still running for handles whose
// Lock gave up; Set.waitAbandoned waits for them (bounded). A count, not
// a sync.WaitGroup: Sets of several backends run at once, and a
// WaitGroup's Wait may not run alongside an Add from zero (the race
// detector reports it).
var abandoned atomic.Int32

func (h *zkLockHandle) Lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- h.l.Lock() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		abandoned.Add(1)
		go func() {
			defer abandoned.Add(-1)
			if err := <-done; err == nil {
				_ = h.l.Unlock()
			}
		}()
		return ctx.Err()
	}
}

func (h *zkLockHandle) Unlock(context.Context) error { return h.l.Unlock() }

// waitAbandoned waits up to 10s for abandoned zk.Lock calls to end,
// looking every 10 ms.
func (s *Set) waitAbandoned() error {
	deadline := time.Now().Add(10 * time.Second)
	for abandoned.Load() > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("zk: %d abandoned Lock calls still running", abandoned.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// Counter reads a server's running count of requests, for requests per
// acquisition. Nil when the backend has none that is cheap to read.
type Counter func(ctx context.Context) (int64, error)

// EtcdCounter sums grpc_server_msg_received_total on the member's
// /metrics: every gRPC request message the member received (unary
// requests, and each message of a Watch or LeaseKeepAlive stream).
func EtcdCounter(endpoints []string) Counter {
	return func(ctx context.Context) (int64, error) {
		var total int64
		for _, ep := range endpoints {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ep+"/metrics", nil)
			if err != nil {
				return 0, err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0, err
			}
			n, found, err := sumMetric(resp.Body, "grpc_server_msg_received_total")
			resp.Body.Close()
			if err != nil {
				return 0, err
			}
			if !found {
				return 0, errors.New("etcd: no grpc_server_msg_received_total in /metrics")
			}
			total += n
		}
		return total, nil
	}
}

func sumMetric(r io.Reader, name string) (int64, bool, error) {
	var total float64
	found := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, false, fmt.Errorf("%q: %v", line, err)
		}
		total += v
		found = true
	}
	return int64(total), found, sc.Err()
}

// ZKCounter reads "Received:" of the four-letter word srvr: packets the
// server received from clients (requests and session pings).
func ZKCounter(addrs []string, fourLetter func(ctx context.Context, addr, cmd string) (string, error)) Counter {
	return func(ctx context.Context) (int64, error) {
		var total int64
		for _, a := range addrs {
			out, err := fourLetter(ctx, a, "srvr")
			if err != nil {
				return 0, err
			}
			found := false
			for _, line := range strings.Split(out, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Received:"); ok {
					n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					if err != nil {
						return 0, err
					}
					total += n
					found = true
				}
			}
			if !found {
				return 0, fmt.Errorf("zk: no Received: in srvr: %q", out)
			}
		}
		return total, nil
	}
}

// MySQLCounter reads the global status variable Questions: statements
// clients sent (the two reads of it add one each).
func MySQLCounter(db *sql.DB) Counter {
	return func(ctx context.Context) (int64, error) {
		var name string
		var n int64
		err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &n)
		return n, err
	}
}

// RunBackend runs n handles of cfg on target in this process for p (after
// one warm-up Lock+Unlock per handle), with lock name name. count, if not
// nil, gives Calls (requests per run); AllCalls is then the same.
func RunBackend(ctx context.Context, cfg Config, target, name string, n int, p Params, count Counter) (Measurement, error) {
	set, err := openWarm(ctx, cfg, target, name, n, p.Duration+time.Minute)
	if err != nil {
		return Measurement{}, err
	}
	defer set.Close()
	// A short contended run, not measured, first: the server's contended
	// paths (a JVM's just-in-time compiler, caches) are then warm for
	// every configuration, not only for those that run after another.
	var warm atomic.Int32
	if w := Contend(ctx, set.Handles, Params{Hold: p.Hold, Think: p.Think, Duration: contendedWarmUp(p.Duration)}, time.Now(), &warm); w.Errors > 0 {
		return Measurement{}, fmt.Errorf("warm-up: %d errors, the first: %s", w.Errors, w.FirstError)
	}
	// A zk.Lock that the warm-up's end abandoned still runs on its handle,
	// which zk.Lock would refuse to lock again ("trying to acquire a lock
	// twice").
	if err := set.waitAbandoned(); err != nil {
		return Measurement{}, err
	}
	// The warm-up's end abandons the waits in flight, some of which a
	// store may still count (a queued node, a gate's wait being
	// cancelled). Each handle takes the lock once more, so the measured
	// run starts from a settled queue. They do so
	// all at once, not one after another: etcd's concurrency.Mutex leaves
	// its key behind when its Lock is cancelled between the transaction
	// that puts it and the reply, and only the same handle's next Lock
	// (which reuses the key of its session) takes it away; in turn, an
	// earlier handle would wait for it until the timeout.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	err = settle(wctx, set.Handles)
	cancel()
	if err != nil {
		return Measurement{}, fmt.Errorf("settling after the warm-up: %w", err)
	}
	var before, after int64
	if count != nil {
		if before, err = count(ctx); err != nil {
			return Measurement{}, err
		}
	}
	var inside atomic.Int32
	r := Contend(ctx, set.Handles, p, time.Now(), &inside)
	if count != nil {
		if after, err = count(ctx); err != nil {
			return Measurement{}, err
		}
	}
	r.Overlaps = max(r.Overlaps, Overlaps(r.Intervals))
	return Measurement{Result: r, Duration: p.Duration, Calls: after - before, AllCalls: after - before}, nil
}

// contendedWarmUp is how long the unmeasured contended run before each
// measured one of RunBackend lasts: a third of the measured run, at most
// a second.
func contendedWarmUp(d time.Duration) time.Duration { return min(d/3, time.Second) }

// settle locks and unlocks once with each handle, all at once, and
// returns the first error.
func settle(ctx context.Context, hs []Handle) error {
	errs := make([]error, len(hs))
	var wg sync.WaitGroup
	for i, h := range hs {
		wg.Go(func() {
			if err := h.Lock(ctx); err != nil {
				errs[i] = fmt.Errorf("lock %d: %w", i, err)
			} else if err := h.Unlock(ctx); err != nil {
				errs[i] = fmt.Errorf("unlock %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
