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
// and goes to the Go driver; an unknown one is an error. A password never
// appears in an error.
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
// findOneAndUpdate with upsert on {_id: name, $or: [{owner: null}, lease
// ran out]}: it takes the document, or creates it held with fence 1, in
// one atomic operation; a duplicate key error means the document exists
// and is held. The update is a pipeline that sets expires_at to
// $$NOW + TTL and increments fence; renewal and release are owner-checked
// updates (release unsets owner and expires_at, keeping the document and
// its fence). Every "now" is the server's $$NOW: client clocks do not
// matter.
//
// ModeHistory (servers without update pipelines, among them FerretDB 1.x,
// used by golocker's tests where no mongod is installed): FerretDB 1.x
// applies findAndModify and update as a read followed by a write by _id,
// so two clients can both take a lock that way. This mode never decides
// by an update that another owner could race: each change of owner
// inserts the next document of the lock's history, "f/<n>/<name>", and the
// unique _id lets exactly one writer win; n is the fencing token. An
// owner renews by updating only its own document and then checking that
// no document n+1 exists. Every lookup is by exact _id. Times come from
// the local clock corrected by the offset to the server's clock, measured
// with hello's localTime every 10 s: off by at most half a round trip plus
// a millisecond, and skew between clients cancels out. The history grows
// by two small documents per acquisition (about 100 bytes plus twice the
// name each): fine for tests and small deployments, not for a hot lock in
// production.
//
// No TTL index and no change stream is relied on: leases end by the
// expires_at comparison alone. If an acquisition fails after its request
// may have reached the server (a cancelled ctx, a broken connection, a
// write concern error), the driver releases by owner at once and again
// shortly after, so that an error never leaves a hold.
//
// # Waiting and what it costs
//
// A waiting Lock tries, then reads the holder's lease (findOne by _id) and
// sleeps with exponential backoff and jitter — from 2 ms up to 250 ms,
// never past the holder's lease — and tries again when the lock looks
// free. In ModeUpdate a waiter costs about five reads a second; in
// ModeHistory each look is a few reads by _id. docs/drivers/mongodb.md
// has measured numbers.
//
// # Capabilities
//
//   - Fencing: the fence field (ModeUpdate) or history number
//     (ModeHistory), strictly increasing per name.
//   - Expiry: a lease that is not renewed ends.
//   - Inspect: Holds lists held locks; ForceRelease frees one.
//   - CrossProcess.
//   - Not Notify (waiters poll), not FIFO, not LostSignal (the next renewal
//     finds a lost hold), not SessionLease.
package mongolock
