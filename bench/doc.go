// Package bench compares golocker's Redis driver (package redislock, used
// through package locker) with two peer libraries on the same Redis:
// go-redsync/redsync v4 and bsm/redislock.
//
// It is its own module, so that the peers stay out of golocker's go.mod;
// a replace directive points it at the working tree. The benchmarks are in
// bench_test.go; `make bench` at the repository root runs them, saves the
// raw output under results/ and prints a table (cmd/table). README.md
// says what each scenario measures and holds the reference table.
//
// The scenarios:
//
//   - Uncontended: one handle locks and unlocks in a loop.
//   - Contended: N handles, each in its own goroutine, lock one name, hold
//     it for Hold, unlock, think for Think, and again, for a fixed Duration,
//     in one process or spread over several worker processes (the test
//     binary run again, see WorkerMain and RunWorkers).
//
// Every library runs in several configurations (Configs): golocker with one
// Client per handle and with one Client shared by all handles; the peers
// with several retry delays, since they wait by polling.
//
// The same scenarios run on the other backends (BackendConfigs,
// RunBackend; selected with -bench.backends): golocker on etcd against
// etcd's concurrency.Mutex, on ZooKeeper against go-zookeeper's Lock, on
// PostgreSQL and MySQL against the database's own lock (pg_advisory_lock,
// GET_LOCK: NativeLocks), and on SQLite and MongoDB alone.
package bench
