// Package redislock is the Redis driver of package locker: standalone
// Redis, Redis Sentinel and Redis Cluster, all through a go-redis
// UniversalClient. RedLock, over several independent Redis instances, is
// package redlock (github.com/golocker/locker/redislock/redlock), whose
// redlock:// scheme importing this package registers too.
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
//	redlock://[user:password@]h1[:6379],h2[:6379],h3[:6379][/db]   package redlock
//
// The user and password are those of the data servers. With several
// hosts, the last one needs its port (a limit of net/url). Query
// parameters, all optional; an unknown one is an error:
//
//	key_prefix=golocker:       prefix of every key (WithKeyPrefix)
//	dial_timeout=5s, read_timeout=3s, write_timeout=3s, pool_size=N   go-redis settings
//	wait_replicas=N            WithWaitReplicas
//	wait_timeout=50ms          with wait_replicas
//	batch=N                    not with wait_replicas (WithBatch; default 0)
//	keyspace_events=true|false WithKeyspaceEvents; default: ask the servers
//	sentinel_username=, sentinel_password=    redis+sentinel: the sentinels' own credentials
//	tls_server_name=, tls_insecure_skip_verify=false, tls_ca_file=,
//	tls_cert_file=, tls_key_file=             rediss
//
// Clients opened from a URL have ContextTimeoutEnabled, so a ctx deadline
// bounds every call, and are closed by the driver's Close. Open returns
// within DefaultOpenTimeout (5s) when its ctx has no deadline, and its
// error names the cause: connection refused, unknown host, a server that
// does not speak TLS (rediss://) or may expect it (redis://),
// authentication failed. A password never appears in an error.
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
// %7B, %7D). Lua scripts (internal/scripts/*.lua) acquire, release, renew,
// free by force and count waiters; they run with EVALSHA, falling back to
// EVAL.
// Each Driver also has a pub/sub channel of its own, its inbox,
// golocker:inbox:<128 random bits>, and, when it watches its keys (Lost
// holds, below), subscribes to the keyspace channels of the keys it holds,
// __keyspace@<db>__:golocker:{orders/42}.
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
//   - Fencing: tokens from the per-name counter, strictly increasing.
//   - Notify and FIFO: waiters queue in Redis (backend.Waiter), and a
//     release hands the lock to the oldest one and tells its Driver by
//     pub/sub, in every process alike.
//   - Expiry: a lease not renewed expires on the server.
//   - CrossProcess. It implements backend.Inspector (Holds SCANs every
//     master; ForceRelease frees the lock and hands it on),
//     backend.QueueInspector, backend.BatchRenewer (one script per Cluster
//     slot and chunk, pipelined) and backend.LogSetter; its leases
//     implement backend.Passer.
//   - LostSignal when the servers publish keyspace events (Lost holds,
//     below); otherwise the next renewal finds a deleted key, and Lost
//     closes then.
//
// # Lost holds
//
// Redis tells a client that a key was deleted only through keyspace
// notifications, which a server publishes when its notify-keyspace-events
// setting asks for them; Redis's default is none. A Driver watches the
// keys of its holds, and declares LostSignal, when the servers publish the
// keyspace events (K) of generic commands (g) and of expiries (x): for
// example notify-keyspace-events "Kgx", or "KA". Open asks each master
// (CONFIG GET) unless keyspace_events says; New watches only with
// WithKeyspaceEvents(true). Set it in the configuration file of every
// server, replicas included: CONFIG SET is not replicated, and a replica
// promoted by a failover keeps its own setting.
//
// A watching Driver subscribes, off the caller's path, to the keyspace
// channel of each key it has held for 20 ms, on the master that has the
// key (in a Cluster each node publishes its own keys' events, unlike
// PUBLISH, which is broadcast), and keeps the subscription 5 s after the
// last hold. (A subscribed key brings its Driver a message for each write
// of its own scripts to it, which go-redis reads at some µs of CPU each:
// a Lock/Unlock loop, whose holds are shorter, never pays it.) When an
// event may have ended a hold — DEL, UNLINK,
// ForceRelease (which deletes the key before it hands the lock on), an
// expiry, an eviction (with e in the setting), RENAME, MOVE — it asks
// Redis for the key's owner, and Lost fires if Redis no longer has the
// hold's. An event names a key, not a hold, so this check is what keeps a
// late event of an older hold (the Driver's own release, another
// process's) from being taken for the loss of a newer one. The same check
// runs when a subscription is confirmed: a new one (the key could have
// been deleted between the grant and the subscription) and one go-redis
// made again after a reconnect (events published while the connection was
// down are lost). On a Cluster, the Driver asks for the slots every second
// while it holds anything, and moves a key's subscription to its slot's
// new master after a failover or a resharding, checking it there.
//
// The holder is told within a message's delivery and one round trip, a
// hold younger than 20 ms once it is 20–25 ms old (figures in
// docs/drivers/redis.md), and of an expiry when Redis removes the key
// (its active expiry runs 10 times a second by default).
// Not seen: FLUSHALL and FLUSHDB, which publish no event per key; a key
// written over by SET (only with $ in the setting); fields of the hash
// changed by hand. The next renewal finds those, within a third of the
// lease. The cost: one more pub/sub connection per Driver (one per master
// on a Cluster); a SUBSCRIBE and a check for each name held 20 ms that
// the Driver did not watch in the last 5 s; a message per write to a
// watched key; no call on the path of Lock and Unlock.
//
// # Waiting
//
// Package locker keeps a Client's waiters for a name and sends the first to
// AcquireWait, which joins the lock's queue in Redis once the Driver is
// subscribed to its inbox (so no grant to it is published before its
// process listens). A release, an expiry found by a waiter, or a
// ForceRelease hands the lock to the oldest waiter whose place has not
// lapsed, in the same script: it becomes the owner, with the next fencing
// token and its own lease, and the script publishes "<token> <owner>" on
// its Driver's inbox; the waiter returns without another call. One release
// costs one script and one message, however many wait in however many
// processes, and the lock is never free while someone waits.
//
// Pub/sub is at-most-once (a reconnect loses messages), so a waiter also
// renews its place every third of its lease (at most every second) and at
// the end of the holder's lease: that call finds a grant whose message was
// lost, and frees an expired lock. A place not renewed lapses after three
// renewal periods and a second: the waiters of a crashed process are
// skipped. A waiter that gives up leaves the queue before AcquireWait
// returns, passing the lock on if it was handed to it meanwhile.
//
// A grant's message can reach a waiter long after it was published — its
// process or its connection stalled — when its lease has run out and the
// same owner is queued again. Every call that leaves a waiter queued
// returns the name's fence counter, and the waiter ignores a grant whose
// token is not above it; a grant that arrives more than half a lease after
// the waiter's last call is checked with Redis, which dates a hold the
// waiter already has exactly.
//
// # Passing
//
// When a hold of a Client ends and the Client has another waiter for the
// name, package locker asks the lease to pass the hold (backend.Passer).
// Only a hold granted with the Driver's inbox can be passed (the inbox
// hears of other processes' waiters, below); a Driver not yet subscribed
// subscribes on such a first request, so a Client whose waiters only ever
// find the lock free passes from its second grant on.
// The hold then goes to that waiter without a call to Redis: Redis keeps
// the hold that began the chain (its owner, its lease, which every
// hold of the chain renews as that owner, and a block of fencing tokens
// that the grant reserved — 64, topped up before they run out), and each
// passed hold takes the next reserved token, so tokens still strictly
// increase across every hold and process. Holds reports the hold of the
// moment. The chain (internal/chain) is a state machine driven by events — the
// grant, a pass, a "q" message, a pub/sub reconnect, a renewal, a
// reservation, the end — and passes only while:
//
//   - reserved tokens are left;
//   - its lease in Redis was set less than a tenth of the TTL ago, and the
//     next hold has the same TTL;
//   - no renewal found the hold gone, and no ForceRelease through the
//     Driver freed it;
//   - no other Driver's waiter is queued: the script that queues one behind
//     a chain tells the chain's Driver (a "q" message on its inbox), a
//     pub/sub reconnect counts as one, and a grant made while one was
//     queued reserves no tokens. Waiters are so served first come, first
//     served across processes, within the delivery of one message.
//
// batch=N (WithBatch) trades that order for throughput when several
// processes contend for one lock: a chain may pass N more times while
// another process's waiter is queued, and reserves tokens for it when its
// grant had none. Every process still gets its turn, but a waiter can wait
// up to N more holds, and the Driver does not declare FIFO.
//
// The cost: a pass makes no owner check in Redis. If another process
// deleted or forced off the chain's hold in the last tenth of a TTL, the
// passed hold learns of it at its next renewal or release — no later than
// its predecessor would have — and its token is below the next owner's, so
// a fenced resource refuses it. With WithWaitReplicas nothing is passed.
// bench/README.md has the figures: what passing gains within a process,
// what batch=N gains across processes.
//
// # Round trips under load
//
// A Driver sends at most four acquire scripts at a time as calls of their
// own; the calls that come while those are in flight share pipelines, sent
// one at a time, of up to 512 scripts (one per server on a Cluster). A
// Client that takes many names at once then costs Redis far fewer reads
// and writes per script. A caller whose ctx ends while its script waits in
// the queue takes it out; one whose script is on its way waits for the
// reply (at most 2s more), as with a call of its own, and undoes whatever
// the script did for its owner before returning. Renewals are
// batched the same way (backend.BatchRenewer): one pipeline of
// renew_many.lua calls, each over up to 500 leases of one slot.
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
// RedLock (package redlock) avoids the replication problem (no
// replicas), but its safety rests on bounded clock drift and process
// pauses, and it has no fencing.
//
// # Options
//
// WithKeyPrefix, WithWaitReplicas, WithBatch, WithKeyspaceEvents and
// WithDialer (for the clients Open creates) configure New and Open; each
// but WithDialer has the URL parameter named above. Option is package
// redlock's too: Open takes its options for a redlock:// URL, and
// redlock.New takes WithKeyPrefix and WithDialer. An option that does not
// apply to a driver is an error matching locker.ErrInvalidOption.
//
// # Logs
//
// go-redis has one logger per process, with no logger per client, and it
// prints on stderr by default: failed dials, reconnections, a Cluster's
// slots reloaded, and the master a Sentinel client finds, also on opening.
// Opening or creating a driver never changes it. CaptureGoRedisLog, which
// a program calls once at start-up, sends go-redis's messages to the
// loggers of the open drivers (the Clients' loggers, locker.WithLogger,
// which discard by default) and nowhere else.
package redislock
