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
// and goes to the Go driver; an unknown one is an error, and so is w=0
// (unacknowledged writes cannot tell whether a lock was taken). Open connects
// through the dial function of WithDialer when one is given, returns when
// its ctx ends (within DefaultOpenTimeout, 5s, when ctx has no deadline),
// and its errors name the hosts tried and the cause (connection refused,
// unknown host, a server that does not speak TLS or that expects it,
// authentication failed) but never the password. The Go driver's log messages go to the Client's logger
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
// {_id: name, owner, expires_at, fence}, never deleted. Acquiring is one
// findOneAndUpdate with upsert on {_id: name} whose update is a pipeline:
// a free lock (no owner, or a lease that ran out) gets the owner, fence +
// 1 and expires_at = $$NOW + TTL; a held one is left as it is. The
// document it returns says which: this owner's (granted), or the holder's
// owner, fence and lease end (a *backend.HeldError). The upsert creates
// the document held with fence 1; when another attempt created it first,
// the duplicate key error is followed by a read that names the holder.
// Renewal and release are owner-checked updates (release unsets owner and
// sets expires_at to $$NOW, keeping the document and its fence). Every
// "now" is the server's $$NOW: client clocks do not matter. The watchdog
// renews many leases at once (backend.BatchRenewer): one updateMany per
// 1000 leases, each document owner-checked, stamping the renewed ones
// with a random stamp that one find reads back.
//
// ModeHistory (servers without update pipelines, among them FerretDB 1.x,
// used by golocker's tests where no mongod is installed): FerretDB 1.x
// applies findAndModify and update as a read followed by a write by _id,
// so two clients can both take a lock that way. This mode never decides
// by an update that another owner could race: each change of owner
// inserts the next document of the lock's history, "f/<n>/<name>", and
// the unique _id lets exactly one writer win; n is the fencing token. A
// head document "h/<name>" names a recent acquisition's document and
// carries a copy of it: an attempt reads the head and the document after
// the one it names (two reads while the lock is held), then inserts. An
// owner renews by updating only its own document and then checking that
// no document n+1 exists, and releases by inserting the free document
// n+1. Every lookup is by exact _id. Times come from the local clock
// corrected by the offset to the server's clock, measured with hello's
// localTime every 10 s: off by at most half a round trip plus a
// millisecond, and skew between clients cancels out. The history grows by
// two small documents per acquisition (about 100 bytes plus twice the
// name each): fine for tests and small deployments, not for a hot lock
// in production.
//
// No TTL index and no change stream is relied on: leases end by the
// expires_at comparison alone. If an acquisition fails after its request
// may have reached the server (a cancelled ctx, a broken connection, a
// write concern error), the driver releases by owner at once and again
// shortly after, so that an error never leaves a hold.
//
// # Waiting
//
// Each Acquire is one attempt, which asks the server and keeps nothing
// for the next. Package locker does the waiting: it calls Acquire again
// with jittered back-off, never past the holder's remaining lease, and
// starts the back-off again when a look finds a new holder (the
// HeldError's Token). MongoDB has no release notification that the
// driver relies on, so waiters poll, and a release does not pick the
// next holder: whichever waiter looks first takes the lock.
//
// # Capabilities
//
//   - Fencing: the fence field (ModeUpdate) or history number
//     (ModeHistory), strictly increasing per name.
//   - Expiry: a lease that is not renewed ends.
//   - CrossProcess.
//   - Not Notify (waiters poll), not FIFO (no queue: the first waiter to
//     look after a release takes the lock), not LostSignal (the next
//     renewal finds a lost hold), not SessionLease.
//
// The Driver also implements backend.Inspector (Holds lists held locks;
// ForceRelease frees one), backend.BatchRenewer and backend.LogSetter.
package mongolock
