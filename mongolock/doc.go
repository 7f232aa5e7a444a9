// Package mongolock is the MongoDB driver of package locker.
//
// Most code opens it by URL and uses package locker:
//
//	import _ "github.com/golocker/locker/mongolock"
//
//	c, err := locker.Open(ctx, "mongodb://app:secret@m1:27017,m2:27017/app?replicaSet=rs0")
//
// or builds it from the *mongo.Client it already has (go.mongodb.org/mongo-driver/v2),
// which Close leaves connected:
//
//	d, err := mongolock.New(client, mongolock.WithDatabase("app"))
//	c, err := locker.New(d)
//
// Package locker does reentrancy, renewal (the watchdog), the lost-hold
// signal and error wrapping; this package does the MongoDB side only.
//
// # URLs
//
//	mongodb://[user:password@]host[:27017][,host2[:27017]…]/[database][?params]
//	mongodb+srv://[user:password@]cluster.example.com/[database][?params]
//
// The path names the database of the lock collection (default
// DefaultDatabase, "golocker"); as in every MongoDB URI it is also the
// default authSource. Query parameters: collection=golocker_locks
// (WithCollection) is golocker's; every other one must be a MongoDB
// connection string option (replicaSet, tls, authSource, w, timeoutMS, …)
// and goes to the Go driver; an unknown one is an error. Open connects
// through the dial function of WithDialer when one is given, returns when
// its ctx ends, and its errors name the hosts tried but never the
// password. The Go driver's log messages go to the Client's logger
// (backend.LogSetter), never to stderr.
//
// # How a lock works
//
// On first use the driver asks the server (hello) whether it is a replica
// set or a sharded cluster — then every write uses majority write concern,
// so that an acknowledged grant survives a failover — and whether it has
// update pipelines (MongoDB 4.2+). That chooses one of two modes, which
// Mode reports.
//
// ModeUpdate (MongoDB 4.2 and later): one document per name,
// {_id: name, owner, expires_at, fence, tickets, serving, serving_at},
// never deleted. Acquiring is one findOneAndUpdate with upsert on
// {_id: name, $expr: granted} (free, and a single attempt, or nobody
// queues, or the waiter's turn; see Waiting): it takes the document, or
// creates it held with fence 1, in one atomic operation; a duplicate key
// error means the document exists and the lock is not granted. The update
// is a pipeline that sets expires_at to $$NOW + TTL, increments fence and
// passes the turn on; renewal and release are owner-checked updates
// (release unsets owner and sets expires_at to $$NOW, keeping the document
// and its fence). Every "now" is the server's $$NOW: client clocks do not
// matter. The watchdog renews many leases at once (backend.BatchRenewer):
// one updateMany per 1000 leases, each document owner-checked, stamping
// the renewed ones with a random stamp that one find reads back.
//
// ModeHistory (servers without update pipelines, among them FerretDB 1.x,
// used by golocker's tests where no mongod is installed): FerretDB 1.x
// applies findAndModify and update as a read followed by a write by _id,
// so two clients can both take a lock that way. This mode never decides
// by an update that another owner could race: each change of owner
// inserts the next document of the lock's history, "f/<n>/<name>", and the
// unique _id lets exactly one writer win; n is the fencing token. Ticket m
// of the lock's queue is the document "t/<m>/<name>", inserted the same
// way, and each history document carries the last ticket served. An
// owner renews by updating only its own document and then checking that
// no document n+1 exists. Every lookup is by exact _id. Times come from
// the local clock corrected by the offset to the server's clock, measured
// with hello's localTime every 10 s: off by at most half a round trip plus
// a millisecond, and skew between clients cancels out. The history grows
// by two small documents per acquisition and one per wait (about 100
// bytes plus twice the name each): fine for tests and small deployments,
// not for a hot lock in production.
//
// No TTL index and no change stream is relied on: leases end by the
// expires_at comparison alone. If an acquisition fails after its request
// may have reached the server (a cancelled ctx, a broken connection, a
// write concern error), the driver releases by owner at once and again
// shortly after, so that an error never leaves a hold.
//
// # Waiting, in turn
//
// Package locker does the waiting: it calls Acquire again, with back-off,
// never past the holder's lease. Polling alone is not fair (an owner that
// releases and locks again takes the lock before the waiters that back
// off), so each lock also keeps a ticket queue, as at a bakery, exactly as
// package mysqllock does: a waiting Lock that does not get the lock takes
// the next ticket, a free lock goes to the ticket whose turn it is, and a
// waiter with a ticket only reads the lock until its turn has come and the
// lock is free. The Driver schedules its waiters' looks through
// HeldError.Left (the head and the next one every quarter of the current
// hold, from 1 ms; the others when they should be next) and answers
// package locker's earlier calls from memory. TryLock takes a free lock
// whatever the queue. A waiter that gave up leaves its ticket behind: once
// the lock has been free for 500 ms and the turn is older than that, a
// later waiter takes it over.
//
// # Capabilities
//
//   - Fencing: the fence field (ModeUpdate) or history number
//     (ModeHistory), strictly increasing per name.
//   - Expiry: a lease that is not renewed ends.
//   - CrossProcess.
//   - Not Notify (waiters poll, in turn), not FIFO as the suite means it
//     (the store does not hand the lock over), not LostSignal (the next
//     renewal finds a lost hold), not SessionLease.
//
// The Driver also implements backend.Inspector (Holds lists held locks;
// ForceRelease frees one), backend.BatchRenewer and backend.LogSetter.
package mongolock
