// Package redislock is the Redis driver of package locker: standalone
// Redis, Redis Sentinel, Redis Cluster (all through a go-redis
// UniversalClient), and RedLock over several independent Redis instances.
//
// Most code opens it by URL and uses package locker:
//
//	import _ "github.com/golocker/locker/redislock"
//
//	c, err := locker.Open(ctx, "redis://:secret@10.0.0.5:6379/0")
//
// or builds it from a go-redis client it already has:
//
//	d, err := redislock.New(rdb) // rdb: *redis.Client or *redis.ClusterClient
//	c, err := locker.New(d)
//
// Package locker does reentrancy, renewal (the watchdog), the lost-hold
// signal and error wrapping; this package does the Redis side only.
//
// # URLs
//
//	redis://[user:password@]host[:6379][/db]
//	rediss://[user:password@]host[:6379][/db]                      TLS
//	redis+sentinel://[user:password@]h1[:26379],h2[:26379]/master[/db]
//	redis+cluster://[user:password@]h1[:6379],h2[:6379]
//	redlock://[user:password@]h1[:6379],h2[:6379],h3[:6379][/db]   at least 3 instances
//
// The user and password are those of the data servers (for RedLock, of
// every instance). With several hosts, the last one needs its port (a
// limit of net/url). Query parameters, all optional; an unknown one is an
// error:
//
//	key_prefix=golocker:       prefix of every key (WithKeyPrefix)
//	dial_timeout=5s, read_timeout=3s, write_timeout=3s, pool_size=N   go-redis settings
//	wait_replicas=N            not redlock (WithWaitReplicas)
//	wait_timeout=50ms          with wait_replicas
//	batch=N                    not redlock, not with wait_replicas (WithBatch; default 0)
//	sentinel_username=, sentinel_password=    redis+sentinel: the sentinels' own credentials
//	tls_server_name=, tls_insecure_skip_verify=false, tls_ca_file=,
//	tls_cert_file=, tls_key_file=             rediss
//	instance_timeout=          redlock (WithInstanceTimeout)
//
// Clients opened from a URL have ContextTimeoutEnabled, so a ctx deadline
// bounds every call, and are closed by the driver's Close. A password never
// appears in an error.
//
// # Keys
//
// The lock "orders/42" is the hash golocker:{orders/42} = {owner, token,
// last, inbox, queued}, which expires with the lease (last is the highest
// fencing token reserved for the holder's Driver, inbox its channel, queued
// set once another Driver's waiter was reported to it: see Passing); its fencing counter is
// golocker:{orders/42}:fence; its waiters are the list
// golocker:{orders/42}:queue (oldest first) and the hash
// golocker:{orders/42}:waiters (each one's deadline, lease and inbox),
// which expire when nobody waits. The name is the keys' hash tag, so on a
// Cluster they share a slot ('%', '{' and '}' in a name are written %25,
// %7B, %7D). Lua scripts in scripts/ acquire, release, renew, free by
// force and count waiters; they run with EVALSHA, falling back to EVAL.
// Each Driver also has a pub/sub channel of its own, its inbox,
// golocker:inbox:<128 random bits>.
//
// The fencing counter is never deleted, so tokens keep growing after a
// release: it costs one small string key per name ever locked, for the
// life of the data (MEMORY USAGE reports about 70 bytes plus the name's
// length). A name space that grows without bound
// (a lock per request ID) grows Redis by that much; delete the counters of
// retired names by hand if needed, or use a separate database. An eviction
// policy that may evict keys without a TTL (allkeys-*) could evict a
// counter and let tokens start again: use noeviction or volatile-*.
//
// # Capabilities
//
// Driver (redis, rediss, redis+sentinel, redis+cluster):
//
//   - Fencing: tokens from the per-name counter, strictly increasing.
//   - Notify and FIFO: waiters queue in Redis, and a release hands the
//     lock to the oldest one and tells its Driver by pub/sub, in every
//     process alike; a Driver passes the lock to its own next waiter in
//     the same order (see Passing).
//   - Expiry: a lease not renewed expires on the server.
//   - Inspect: Holds SCANs every master; ForceRelease frees the lock and
//     hands it on.
//   - CrossProcess.
//   - Not LostSignal: Redis does not tell a client that a key was deleted
//     or expired; the next renewal finds it (within TTL/3), and Lost
//     closes then.
//
// RedLock: Expiry, Inspect, CrossProcess; no Fencing (Token is 0), no
// Notify (waiters poll with jittered backoff).
//
// # Waiting
//
// A waiting Lock that finds the lock held joins the lock's queue in Redis,
// once its Driver is subscribed to its inbox (so no grant to it is
// published before its process listens). A release, an expiry found by a
// waiter, or a ForceRelease hands the lock to the oldest waiter whose
// place has not lapsed, in the same script: it becomes the owner, with
// the next fencing token and its own lease, and the script publishes
// "<token> <owner>" on its Driver's inbox; the waiter returns without
// another call. So one release costs one script and one message, however
// many wait in however many processes, waiters are served in the order
// they joined, and the lock is never free while someone waits.
//
// Pub/sub is at-most-once (a reconnect loses messages), so a waiter also
// renews its place every third of its lease (at most every second) and at
// the end of the holder's lease; that call finds a grant whose message was
// lost, and frees an expired lock. A place not renewed lapses after three
// renewal periods and a second (4s with leases of 3s or more): the waiters
// of a crashed process are skipped after that, and one handed the lock
// before its place lapsed holds it until its lease ends, as a crashed
// holder would. A waiter that gives up (ctx, Close) leaves the queue
// before Lock returns, passing the lock on if it was handed to it
// meanwhile. A Driver has one subscription, whatever the number of names
// it waits for; if its SUBSCRIBE fails, its waiters poll with backoff.
//
// # Passing
//
// When a hold of a Driver ends and the next waiter is the same Driver's,
// the lock is passed to it without a call to Redis: the hand-off costs a
// goroutine's wake-up instead of a round trip. Redis keeps the hold that
// began the run (its owner, its lease, which each hold of the run renews
// as that owner) and Holds reports the hold of the moment. The Driver's
// waiters that arrive while it holds the lock wait in the process, with no
// call either, unless another process's waiter is queued (with batch=N,
// also then, while the run may still pass the lock before that waiter). Each passed hold
// takes the next of a block of fencing tokens that the grant reserved (64,
// topped up by a script call before they run out), so tokens still
// strictly increase across every hold and process; with a Driver that
// waits, consecutive grants from Redis skip the unused part of a block.
//
// The order stays first come, first served across processes, within the
// delivery of one message: a run does not begin while another process's
// waiter is queued, and the script that queues another process's waiter
// behind a run tells the holder's Driver (on its inbox), which passes no
// more, and its own waiters queue in Redis behind that waiter.
// A waiter that queued less than a message's delivery before a local one
// arrived may be served after it. A run also ends, releasing in Redis,
// when the lease was last set in Redis over a tenth of the TTL ago (a run
// never outlives a hold's lease), or between holds with different TTLs.
//
// batch=N (WithBatch) trades that order for throughput when several
// processes contend for one lock: a run may go on for up to N holds while
// another process's waiter is queued, and then ends, handing the lock to
// the oldest waiter in Redis (the run's later waiters queue behind it).
// Every process still gets its turn, but a waiter can wait up to N more
// holds, and the Driver does not declare FIFO. With 32 handles over 4
// processes and batch=16, bench/ measured 0.80 of the ideal rate against
// 0.59 without (bench/README.md).
//
// The cost: a release that passes the lock makes no owner check in Redis.
// If the run's hold was deleted or forced off by another process in the
// last tenth of a TTL, that Unlock returns nil rather than ErrLost, and
// the next hold finds the loss at its renewal or release (when the run's
// lease would have been renewed, so no later than its predecessor would
// have); its token is below the next owner's, so a fenced resource refuses
// it. A ForceRelease through the same Driver ends the run at once. With
// WithWaitReplicas nothing is passed.
//
// # Topologies
//
// Standalone, Sentinel and Cluster run the same scripts through go-redis,
// which follows Cluster redirections and Sentinel failovers. A Cluster
// moving a lock's slot (resharding) keeps the hold: its keys move with the
// slot and renewals follow the redirection (while a slot's keys are split
// between two nodes, an acquisition is told TRYAGAIN, and retried).
// Pub/sub uses classic channels, which a Cluster broadcasts to every node,
// so a Driver's one connection to any node hears every grant to it.
//
// RedLock (redlock://, NewRedLock) follows the algorithm of the Redis
// documentation over N independent instances: the acquire script runs on
// all of them at once, each bounded by a short timeout; the lock is held if
// a majority granted it and the time that took leaves a validity (TTL −
// elapsed − drift, drift = TTL/100 + 2ms) above zero. Otherwise it is
// released on every instance that granted it or did not answer. Renewal and
// release also need a majority. Losing fewer than half of the instances
// loses no lock.
//
// # Failover
//
// Redis replicates asynchronously. When a master fails, the replica that
// replaces it may lack the last writes the master acknowledged — a lock
// just granted, or its fencing counter's last increment, or a renewal — so
// another client can be granted a lock that its previous owner still
// believes it holds. No setting of this package makes Redis a consensus
// store.
//
// wait_replicas=N (WithWaitReplicas) narrows the window: after each grant,
// WAIT N timeout blocks until N replicas have received the grant (and the
// counter's increment), and the acquisition fails with ErrNotReplicated,
// the lock released again, if they did not within the timeout. (A lock
// handed to a waiter was written by the releaser's connection, so the
// waiter renews it on its own connection and WAITs for that write, which
// replicates after the grant.) What it
// does not do: WAIT is not a transaction — a grant that was not
// acknowledged in time may still reach replicas, and may survive a
// failover after the release; renewals are not waited for, so a failover
// can still shorten a lease by up to TTL/3 (the hold is then lost sooner
// than its owner expects); Sentinel may promote a replica that did not
// acknowledge; and a master restarted without persistence forgets every
// lock. Use it when a failover must not routinely lose locks, and pair it
// with fencing tokens where overlapping owners would corrupt data: pass
// Token() with every write, and have the resource refuse tokens lower than
// the highest it has seen. Fencing tokens, not the lock, are what protect
// the resource.
//
// RedLock avoids the replication problem (no replicas), but its safety
// rests on bounded clock drift and process pauses, and it has no fencing.
//
// # Options
//
// WithKeyPrefix, WithWaitReplicas (Driver) and
// WithInstanceTimeout (RedLock) configure New, NewRedLock and Open; each
// has the URL parameter named above. An option that does not apply to a
// driver is an error.
package redislock
