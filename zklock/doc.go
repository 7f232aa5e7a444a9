// Package zklock is the ZooKeeper driver of package locker: the lock recipe
// of ZooKeeper's documentation and Apache Curator (protected ephemeral
// sequential nodes), without the traps of go-zookeeper's zk.Lock.
//
//	import _ "github.com/golocker/locker/zklock"
//
//	c, err := locker.Open(ctx, "zk://10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181/locks")
//
// or, on a connection the program already has (Close leaves it open):
//
//	d, err := zklock.New(conn, zklock.WithSessionTimeout(10*time.Second), zklock.WithPrefix("/locks"))
//	c, err := locker.New(d)
//
// New needs the connection's session timeout, which go-zookeeper does not
// expose: the timeout given to zk.Connect, or the server's maximum (20
// ticks) if that is lower.
//
// # URLs
//
//	zk://[user:password@]host1:2181[,host2:2181...][/prefix][?param=value&...]
//
// The hosts are the ensemble's servers (port 2181 when omitted); the path
// is the node under which the locks live (default /golocker); a user and
// password authenticate with the digest scheme, and the Driver's nodes are
// then created with every permission for their creator only
// (zk.AuthACL(zk.PermAll)), so that every Driver sharing the locks needs
// the same credentials; without them, world:anyone (WithACL changes
// either). Parameters, of which any other is an error:
//
//	session_timeout=10s   session timeout asked for (WithSessionTimeout)
//	connect_timeout=5s    bound on Open's first exchange with the ensemble (WithConnectTimeout)
//
// The server keeps a session timeout between 2 and 20 ticks (4s to 40s with
// the default tickTime); Open uses the timeout the server granted, and
// refuses a session_timeout below 200ms, or one the server raised (it is
// below the server's minimum, and a crashed owner's holds would outlive
// it). Open
// returns when its ctx ends, and within the connect timeout
// (DefaultConnectTimeout, 5s) in any case; WithDialer routes its
// connections (a proxy, a test's conformance.FaultNet). It probes the
// servers beside the connection, which retries silently, so that its error
// names the cause: connection refused, unknown host, a server that speaks
// TLS, no answer. Errors name the servers and wrap go-zookeeper's; the
// password never appears in one. go-zookeeper's log
// lines go to the logger package locker gives the Driver (SetLogger; it
// discards by default), never to stderr.
//
// # How it works
//
// Lock name n is the node prefix/n ('/', '%', "." and "..", and the
// characters ZooKeeper refuses in a node name, are escaped as %XX). Each
// owner that holds or waits for n has one ephemeral sequential node under
// it, _c_<guid>-lock-<sequence>, as Curator names them; the lowest sequence
// holds the lock.
//
//   - AcquireWait (backend.Waiter: package locker's Lock, for the first of a
//     Client's waiters of a name) creates the owner's node. When the
//     connection drops with the create in flight, the create may or may not
//     have been applied: the node is looked up by its GUID once the client
//     is connected again, instead of creating a second one, which would
//     block the lock for as long as the session lives.
//   - A waiter watches only the next lower node — a release wakes one
//     waiter, the next in arrival order. Once woken it lists the lock's
//     nodes again, which shows whether its own node still exists (a waiter
//     whose session expired never returns a hold it does not have), and it
//     gives up its place when its session is declared lost.
//   - Acquire (TryLock, one attempt that never waits) creates a node only
//     when a synced listing shows the lock has none, and deletes it if it
//     is not the lowest (so that crowds of TryLocks cannot keep each other
//     out for ever); a held lock is backend.ErrHeld.
//   - The caller's ctx is honoured while waiting and during every request
//     (go-zookeeper's requests take no context: one that is abandoned
//     finishes on its own goroutine). Every failure and cancellation deletes
//     the node before returning, with a context of its own bounded to 2s; a
//     create in flight when ctx ends is given those 2s to finish, then
//     cleaned up in the background. A node whose deletion fails is deleted
//     in the background while the session lives.
//   - Unlock deletes the node: its path (GUID and sequence) belongs to this
//     hold and no other, so a stale owner's Unlock, even through the same
//     Driver and session, never deletes the next owner's node.
//   - Names are escaped into one node each: "x" and "x/y" are siblings,
//     never parent and child.
//   - A hold passes to the next owner of the same Client (backend.Passer:
//     package locker asks when the Client has a waiter for the name) without
//     a new node: one multi checks that the version of the lock's node is
//     still the one the hold's create left — every create of a lock node
//     writes its lock's node, so nobody has queued behind the hold since —
//     and writes the new owner into the hold's node. A waiter of another
//     Client or process that queued meanwhile makes the check fail: the
//     hold is released, and that waiter is next, in arrival order. A
//     hand-off inside a Client then costs one write, where a release and a
//     new acquisition cost three requests (delete, create, list). A hold
//     whose session may not last half a timeout more is not passed.
//
// The lock's node is created when missing, as a container node, which the
// server deletes once it has been empty for a while (its container check
// runs every minute by default): empty parents clean themselves up. The
// prefix's own nodes are persistent. Container nodes need ZooKeeper 3.5.3
// or later.
//
// # Capabilities
//
// Fencing: the token is the node's czxid, the transaction id that created
// it, or, for a hold passed inside a Client, the zxid of the write that
// passed it (the node's mzxid): greater than the tokens before it, lower
// than those of nodes created after it. Sequence numbers start again when a
// lock's node is deleted and re-created, zxids never do. Notify and FIFO, as above;
// backend.QueueInspector.Waiters counts the lock's nodes but the holder's.
// LostSignal, SessionLease and Expiry: see below. backend.Inspector: Holds
// lists the lowest node of each lock, with its data (the owner) and mzxid
// (the token; Expires is zero: a hold lasts as long as its session);
// ForceRelease deletes it and its owner's Lost fires. CrossProcess.
//
// The session, not package locker, keeps holds alive: Request.TTL and
// locker.WithTTL do not change how long a hold lives (WithFixedLease still
// ends one at its TTL: package locker releases it then). The session of a
// Driver whose process dies expires after its timeout, and its nodes with
// it.
//
// # When a hold is lost
//
// Lost (a backend.LostSignal) fires when the node is deleted (ForceRelease,
// an operator: seen by a watch the hold sets once it has lasted 100 ms, so
// within that and a round trip) and when the session is lost. The Driver
// sends a sync every fifth of the session timeout (a sync goes through the
// ensemble's leader, so a server cut off from the quorum cannot answer it);
// a session that answered a request sent at time t cannot expire before t
// plus its timeout. The Driver declares it lost a fifth of the timeout
// before that when no newer request was answered, so that an owner cut off
// from the ensemble hears of it before another owner can be granted its
// lock; it also declares it lost as soon as the client learns that the
// server expired it.
//
// A lost session is never papered over. go-zookeeper opens a new session
// by itself after an expiry: the Driver uses it for new acquisitions only,
// and every hold of the old session stays lost. A session that was declared
// lost but turns out alive when the ensemble answers again is treated the
// same way: its holds stay lost, and the Driver deletes their nodes.
//
// Limits. The server restarts a session's countdown when a server that the
// client talks to hears from it; a follower reports that to the leader
// within half a tick, which the margin covers when the session timeout is
// at least 3 ticks. The clocks of the owner and of the ensemble are
// assumed to run at the same rate (not to agree), to within the margin. And
// nothing can help a process that does not run: an owner paused longer
// than the session timeout — a long GC, a VM migration, SIGSTOP — learns
// that its hold is lost only when it resumes (at once, then), and another
// owner may hold the lock by then; if it goes on to write to the resource
// the lock guards, it writes without the lock. Fencing tokens make that
// harmless: pass Mutex.Token with every write, and have the resource refuse
// a token lower than the highest it has seen — the paused owner's token is
// lower than its successor's.
//
// Close ends the session if Open made the connection, which deletes at once
// whatever the Driver still held.
package zklock
