// Package etcdlock is the etcd driver of package locker: locks held by the
// keys of a session, as in etcd's own concurrency.Mutex, without its traps.
//
//	import _ "github.com/golocker/locker/etcdlock"
//
//	c, err := locker.Open(ctx, "etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379/locks")
//
// or, on an etcd client the program already has (Close leaves it open):
//
//	d, err := etcdlock.New(cli, etcdlock.WithPrefix("/locks"))
//	c, err := locker.New(d)
//
// # URLs
//
//	etcd://[user:password@]host1:2379[,host2:2379...][/prefix][?param=value&...]
//
// The hosts are the cluster's client endpoints (port 2379 when omitted);
// the path is the key prefix (default /golocker); a user and password log
// in with etcd's authentication. Parameters, of which any other is an
// error:
//
//	session_ttl=10s                 TTL of the Driver's session, whole seconds (WithSessionTTL)
//	dial_timeout=5s                 bound on Open's connection and first request (WithDialTimeout)
//	tls=true                        TLS, verifying the servers with the system's roots
//	tls_ca_file=/path/ca.pem        CA certificates (PEM) that sign the servers' certificates
//	tls_cert_file=, tls_key_file=   client certificate and key, for client authentication
//	tls_server_name=etcd.internal   name the servers' certificates must have
//	tls_insecure_skip_verify=true   verify nothing (tests only)
//
// Any tls_ parameter turns TLS on. WithTLSConfig gives Open a *tls.Config
// instead, and WithDialer a dial function (a proxy, a test's
// conformance.FaultNet). Open returns when its ctx ends, and within the
// dial timeout (DefaultDialTimeout, 5s) in any case. It probes the
// endpoints beside the client, whose connections retry silently, so that
// its error names the cause: connection refused, unknown host, a server
// that does not speak TLS or that expects it, authentication failed.
// Errors name the endpoints and wrap the client's; the password never
// appears in one. The
// client's zap logger sends its entries to the logger package locker gives
// the Driver (SetLogger; it discards by default), never to stderr.
//
// # How it works
//
// A Driver has one session: a lease that the Driver renews every TTL/3.
// Lock name n is the key range prefix/n/ ('/' and '%' in n are escaped, so
// that two names never share a range: "x" never sees the keys of "x/y").
// The session uses one key in the range, prefix/n/<lease> (prefix/n/<lease>~1,
// ~2… after a write to it failed, see Unlock), attached to the lease, with
// the owner as its value — package locker makes one acquisition of a name
// at a time per Client, and successive holds reuse the key, so that deleted
// keys do not pile up in etcd's index between compactions. The key with the lowest create revision holds the lock.
//
//   - AcquireWait (backend.Waiter: package locker's Lock, for the first of
//     a Client's waiters of a name) creates the owner's key and reads the
//     range's lowest key in one transaction. When its key is not the
//     lowest, it waits for the deletion of the nearest older key only — a
//     release wakes one waiter, the next in arrival order — and then checks,
//     in one read, that its key still exists (else its session ended: it
//     queues again, in a new session, and never returns a hold it does not
//     have) and whether it is now the lowest.
//   - Acquire (TryLock, one attempt that never waits) creates its key only
//     if the range is empty, in one transaction: it never queues and never
//     wakes anyone. A held lock is a backend.HeldError that names the
//     holder and its token, read in the same transaction.
//   - Unlock deletes the key with a plain Delete, the stock recipe's one
//     request, when nothing but its hold can have made it: the hold is the
//     last one granted the key, no acquisition of the key by the Driver has
//     begun since, and none begins until the Delete has its answer.
//     Otherwise (a hold force-released whose key the Driver made again,
//     say) it deletes the key only if its create revision is still the
//     hold's. Either way a stale owner, even on the same session, never
//     deletes the next owner's key. A Delete that fails, or the Put of an
//     acquisition that fails in flight, may still be applied later, so the
//     session's next holds of the name use another key (prefix/n/<lease>~1,
//     ~2…), out of its reach.
//   - An acquisition whose ctx ends deletes its key before it returns, with
//     a context of its own bounded to 2s, so that a cluster that is down
//     cannot hang it; a key whose deletion fails is deleted in the
//     background while the session lives. A create whose outcome is unknown
//     (its ctx ended while it was in flight) is fenced off by a small key
//     under prefix!aborted/, which its put is conditioned on and which lives
//     as long as the session.
//   - A waiter watches the key before its own, and a hold its own key once
//     it has lasted 100 ms (a hold released sooner costs the two
//     transactions alone), through one gRPC watch stream per Driver: a
//     watch is a message to create it from the revision the watcher read,
//     and one to cancel it, with no goroutine of its own.
//
// The Driver needs etcd 3.4 or later (transactions that compare a whole
// key range), and the same key prefix on every Driver that shares the
// locks.
//
// Where concurrency.Mutex falls short: two Mutexes on one session share its
// key and both believe they hold the lock (here the key names the owner,
// and one acquisition of a name at a time uses it); Unlock deletes its key
// unconditionally; a Lock that gives up leaves its key when the cluster
// does not answer; and nothing says that the session is about to expire.
//
// # Capabilities
//
// Fencing: the token is the key's create revision, the cluster's revision
// counter, which grows across names, releases and restarts. Notify and
// FIFO, as above; backend.QueueInspector.Waiters counts the keys of a name
// but the holder's. LostSignal, SessionLease and Expiry: see below.
// backend.Inspector: Holds lists the lowest key of each name (Expires is
// zero: a hold lasts as long as its session), ForceRelease deletes it and
// its owner's Lost fires. CrossProcess.
//
// The session, not package locker, keeps holds alive: Request.TTL and
// locker.WithTTL do not change how long a hold lives (WithFixedLease still
// ends one at its TTL: package locker releases it then). A Driver whose
// process dies stops renewing its lease, and its locks are freed once the
// session TTL has run out on the server.
//
// # When a hold is lost
//
// Lost (a backend.LostSignal) fires when the key is deleted (ForceRelease,
// an operator: seen by the hold's watch, set up once the hold has lasted
// 100 ms from the revision after its grant, so within that and a round
// trip), when the session's lease is gone, and when no keepalive has been
// answered in time.
// The Driver knows that its lease cannot end on the server before the time
// it sent the last answered keepalive plus the TTL; it declares the session
// lost a fifth of the TTL before that, so that an owner cut off from the
// cluster hears of it before another owner can be granted its lock. It
// then revokes the lease if it can, and later acquisitions use a new
// session. A change of leader keeps holds: the new leader extends every
// lease. This assumes that the clocks of the owner and of the cluster run
// at the same rate (not that they agree), to within that margin.
//
// It cannot help a process that does not run. An owner paused longer than
// the TTL — a long GC, a VM migration, SIGSTOP — learns that its hold is
// lost only when it resumes (at once, then), and by that time another owner
// may hold the lock; if the paused owner goes on to write to the resource
// the lock guards, it writes without the lock. No lock service can prevent
// that. Fencing tokens make it harmless: pass Mutex.Token with every write,
// and have the resource refuse a token lower than the highest it has seen
// — the paused owner's token is lower than its successor's.
//
// Close revokes the session, which frees whatever it still held, and
// closes the client if Open made it. A Driver that cannot reach the
// cluster then leaves its lease to expire.
package etcdlock
