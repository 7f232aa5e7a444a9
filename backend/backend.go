// Package backend defines the interfaces to be implemented by lock drivers for
// package locker.
//
// Most code should use package locker. A driver implements only what its store
// does natively: one attempt to take a named lock for an owner, the renewal and
// release of that hold with an owner check, its fencing token, and, where the
// store can, a native wait (Waiter), a wake-up when a lock may be free
// (Watcher), a signal when the store drops a hold (Lease.Lost), a hand-off of a
// hold inside one Client (Passer) and the renewal of many leases at once
// (BatchRenewer). Everything else — the wait itself (one queue per name per
// Client, back-off bounded by the holder's lease), reentrancy and ownership,
// the renewal scheduler, the lost-hold signal seen by users, option
// validation, error wrapping, the URL registry — lives once in package locker.
//
// A driver proves itself with package conformance, which runs the checks for
// each capability the driver declares and fails it when the declaration does
// not match what it does.
//
// # Optional interfaces
//
// Abilities that only some drivers have are small separate interfaces found by
// type assertion, as in database/sql/driver: Waiter, Watcher, Inspector,
// QueueInspector, BatchRenewer, LogSetter, Dequeuer on a Driver; Passer,
// Downgrader and Proclaimer on a Lease. Each one's doc says what package locker does
// without it.
//
// # Primitives
//
// Every primitive is one model: weighted holds against a name's limit (see
// Kind). A Mutex hold is 1 of 1; a Semaphore's n permits are n of N; an
// RWMutex's read is 1 of RWLimit and its write all of them, an Election's
// term 1 of 1 with the leader's value. A driver
// implements one acquisition for all of them, and declares
// Capabilities.Weighted when it takes the weighted kinds.
//
// # How package locker calls a driver
//
// For each name and kind, a Client lets one acquisition at a time ask the
// store: the oldest of its waiters for that name. For a Mutex it asks only
// while no owner of the Client holds the name, so a driver never sees two
// calls of one Client for one Mutex at once, except a Release or Renew of a
// hold that has been lost; for the weighted kinds (Semaphore, RWMutex),
// the Client's other holds of the name are renewed, released and
// downgraded while it asks. The methods
// of one Lease are never called at the same time: Renew calls follow one
// another, Release (or a Pass that returned a lease) is called at most once
// and nothing is called after it; Renew and Release may be called after the
// lease's Lost signal fired, and must then return an error wrapping ErrLost.
package backend

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Driver is one connection to a lock store. It must be safe for concurrent use.
type Driver interface {
	// Acquire makes one attempt to take the lock r.Name for the owner
	// r.Owner with a lease of r.TTL: it asks the store (one request, or the
	// few of one atomic exchange) and returns what the store answered. It
	// never waits for another owner, never tries again while the lock is
	// held, and keeps no memory between calls: two calls with the same
	// request are two attempts, and an attempt after the holder released
	// gets the lock. When the lock is held it returns an error wrapping
	// ErrHeld, preferably a *HeldError that says how long the holder's
	// lease has left. Waiting — when to try again, and in which order the
	// waiters of a store without a queue try — is package locker's.
	//
	// A non-nil error means nothing is held for r.Owner: when a request may
	// have taken effect on the server although the call failed (ctx ended
	// while the request was in flight, a lost reply), the driver releases by
	// r.Owner before returning, with a context that is not the cancelled
	// one.
	//
	// A driver does not implement reentrancy: package locker never calls
	// Acquire for an owner that holds r.Name.
	Acquire(ctx context.Context, r Request) (Lease, error)

	// Capabilities declares what the driver supports. It must return the
	// same value for the life of the driver.
	Capabilities() Capabilities

	// Close releases the driver's resources. Package locker releases every
	// hold before calling Close. A driver built from a client the user
	// supplied does not close that client.
	Close() error
}

// Request describes one acquisition.
type Request struct {
	// Name is the lock's name, validated by package locker with CheckName:
	// not empty, valid UTF-8, no NUL byte, at most MaxNameLen bytes. A driver that cannot
	// store a particular name returns an error wrapping ErrInvalidName.
	Name string

	// Owner identifies this hold. It is unique for every acquisition, so a
	// stale holder can never pass an owner check meant for the next one.
	Owner string

	// TTL is the lease: the store frees the lock if the hold is not renewed
	// or released within TTL. Drivers whose holds live as long as a session
	// (Capabilities.SessionLease) may ignore it.
	TTL time.Duration

	// Kind is the primitive the name belongs to. Each kind's names are
	// locks of their own: a driver keeps the state of a Mutex named "x"
	// apart from that of a Semaphore or an RWMutex named "x", so that one
	// never stands in for another. Package locker sends kinds other than
	// Mutex only to drivers that declare Capabilities.Weighted.
	Kind Kind

	// Limit is how many units the name has, and Weight how many of them
	// this hold takes (1 <= Weight <= Limit <= MaxLimit). A Mutex hold is 1
	// of 1 (a Mutex request may leave both 0); n permits of a Semaphore of
	// N are n of N; an RWMutex's read hold is 1 of RWLimit and its write
	// hold RWLimit of RWLimit. See Kind for the rule that grants weighted
	// holds.
	Limit, Weight int64

	// Value is stored with the hold, for a weighted kind: an Election's
	// candidate value (at most MaxValueLen bytes). Inspector.Holds reads it
	// back, and Proclaimer changes it.
	Value string

	// Queue is set by package locker on every request of a wait (Lock,
	// not TryLock) whose Kind is not Mutex. When the store cannot grant
	// the hold now, an attempt that returns ErrHeld — Acquire, or an
	// AcquireWait that cannot wait natively — keeps a place for Owner in
	// the name's queue, or renews the place that Owner's earlier attempt
	// made: no request that arrives after it is granted before it, and the
	// place lapses if it is not asked for again within TTL. Package locker
	// asks again with the same Owner, and calls Dequeuer.Dequeue when the
	// wait ends without a grant. (An AcquireWait that waits natively keeps
	// its waiter queued anyway, and leaves nothing queued when it fails.)
	Queue bool
}

// Kind is the primitive a name belongs to (Request.Kind).
//
// A Mutex has one holder at a time. The weighted kinds (Semaphore, RWMutex,
// Election) follow one rule, which a driver that declares
// Capabilities.Weighted implements atomically in the store: a request is
// granted when the weights the name's holds take, plus its Weight, are at
// most Limit, and no request waiting in the store's queue of the name
// (through Waiter, or a place that Request.Queue made) arrived before it.
// So waiters are granted in arrival order, as many at once as fit: a
// waiting writer of an RWMutex keeps readers that come after it out, and a
// waiter for n permits is not overtaken by waiters for fewer. Acquire (one
// attempt, no Queue) is granted only when nobody waits.
//
// The store keeps a name's Limit while the name has holds or waiters; a
// request with another Limit is refused with an error wrapping
// ErrLimitConflict, and neither granted nor queued.
type Kind uint8

// The kinds.
const (
	Mutex     Kind = iota // one holder: Limit and Weight 1
	Semaphore             // Limit permits; a hold takes Weight of them
	RWMutex               // Limit RWLimit; a read weighs 1, a write RWLimit
	Election              // one leader: Limit and Weight 1, its Value the leader's
)

// MaxValueLen is the longest Request.Value, in bytes.
const MaxValueLen = 4096

// MaxLimit is the largest Limit of a request.
const MaxLimit = 1 << 30

// RWLimit is the Limit of every RWMutex request, and the Weight of its
// write holds: a write excludes every other hold, and reads share.
const RWLimit = MaxLimit

var kindNames = [...]string{"mutex", "semaphore", "rwmutex", "election"}

// String returns the kind's name: "mutex", "semaphore", "rwmutex" or
// "election".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// HeldError is the error of an Acquire that found the lock held by another
// owner. It matches ErrHeld with errors.Is. Package locker waits at most
// Left before it tries again, and names the holder in errors and in lockctl.
type HeldError struct {
	// Left is how long the holder's lease has left as the store sees it,
	// or 0 when the store does not say (or the hold lasts as long as a
	// session).
	Left time.Duration
	// Owner and Token are the holder's, when the store says ("" and 0
	// otherwise).
	Owner string
	Token uint64
}

func (e *HeldError) Error() string {
	var b strings.Builder
	b.WriteString(ErrHeld.Error())
	var parts []string
	if e.Owner != "" {
		parts = append(parts, "owner "+e.Owner)
	}
	if e.Token != 0 {
		parts = append(parts, "token "+strconv.FormatUint(e.Token, 10))
	}
	if e.Left > 0 {
		parts = append(parts, e.Left.Round(time.Millisecond).String()+" left")
	}
	if len(parts) > 0 {
		b.WriteString(" (" + strings.Join(parts, ", ") + ")")
	}
	return b.String()
}

// Is makes a HeldError match ErrHeld.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Lease is one granted hold. See the package doc for how package locker
// calls its methods.
type Lease interface {
	// Token returns the fencing token of this hold: strictly greater than
	// every token granted before for the same name, or 0 when the driver
	// does not declare Capabilities.Fencing.
	Token() uint64

	// Start returns the local time from which the lease's TTL counts: a
	// time no later than when the store started the lease, normally when
	// the request that was granted was sent. For a waiting acquisition that
	// is the last attempt, not the start of the wait. Package locker
	// declares the hold lost before Start+TTL, so a Start that is too late
	// would let an owner believe it holds a lock that has expired.
	Start() time.Time

	// Renew extends the lease to ttl from the time the request is sent
	// (package locker notes that time before calling), with an owner check
	// done atomically by the store. It returns an error wrapping ErrLost
	// when the hold is no longer this owner's; any other error is treated
	// as transient and retried by package locker while the lease lasts.
	Renew(ctx context.Context, ttl time.Duration) error

	// Release frees the hold, with an owner check done atomically by the
	// store. It returns an error wrapping ErrLost when the hold was no
	// longer this owner's (it expired, or was forced off); the lock of
	// whoever holds it now is untouched.
	Release(ctx context.Context) error

	// Lost returns the signal that the driver fires when the store reports
	// that the hold is gone — its key deleted by anyone (a forced release),
	// its session expired — or nil when only Renew can tell, which is
	// allowed only when Capabilities.LostSignal is false. It returns the
	// same value on every call.
	Lost() *LostSignal
}

// Waiter is implemented by drivers whose store keeps a queue of waiters
// (etcd and ZooKeeper by sequence, Redis with its queue script): the store
// hands the lock to the next waiter when it is freed. Package locker calls
// AcquireWait for the first waiter of a name of a Client once no owner of
// the Client holds the name. Without Waiter, package locker retries Acquire
// with jittered back-off bounded by the holder's remaining lease, cut short
// by the driver's Watcher and by releases of the same Client.
type Waiter interface {
	// AcquireWait takes r.Name for r.Owner, waiting until the store grants
	// it or ctx ends; it then returns ctx.Err() (possibly wrapped). It must
	// not wait longer than the holder's remaining lease before the store
	// looks again, and it follows Acquire's rule for errors: a non-nil
	// error means nothing is held and nothing is left queued for r.Owner.
	//
	// A driver that cannot wait in the store for this request now (the
	// connections its native wait needs are all in use) returns the
	// ErrHeld of one attempt instead, as Acquire would: package locker then
	// waits as it does for a driver without Waiter, and calls AcquireWait
	// again when it would have called Acquire. Any other error ends the
	// wait.
	AcquireWait(ctx context.Context, r Request) (Lease, error)
}

// Watcher is implemented by drivers whose store can tell that a lock may
// have been freed but does not hand it to a waiter (a pub/sub channel per
// lock). Package locker uses it to end a waiter's back-off early.
type Watcher interface {
	// Watch returns a channel that receives a value, best effort, when
	// the holds of the name of kind may have changed — one freed (or some
	// of a weighted lock's units), one granted, a value proclaimed — until
	// stop is called. A watch that cannot be set up returns a nil channel:
	// a waiter then only backs off, and an observer of an Election polls.
	Watch(kind Kind, name string) (ch <-chan struct{}, stop func())
}

// Dequeuer is implemented by Weighted drivers that keep places in a queue
// for the attempts of polled waits (Request.Queue). Package locker calls
// Dequeue when such a wait ends without a grant (its ctx ended, the Client
// closed, the store failed for good), so that the place stops holding
// back the requests behind it at once, not only when it lapses.
type Dequeuer interface {
	// Dequeue removes r.Owner's place in the queue of r.Name, if it has
	// one; a place that was never made or has lapsed is not an error. A
	// hold granted to r.Owner is not touched (package locker releases it
	// through its lease).
	Dequeue(ctx context.Context, r Request) error
}

// Proclaimer is implemented by the leases of Weighted drivers: it changes
// the value stored with the hold (an Election leader's), with the owner
// check done atomically by the store; it returns an error wrapping ErrLost
// when the hold is no longer this owner's.
type Proclaimer interface {
	Proclaim(ctx context.Context, value string) error
}

// Downgrader is implemented by the leases of Weighted drivers: it lowers
// the weight of a hold in place, for an RWMutex's downgrade from a write
// hold to a read hold. The hold keeps its token, its lease and its place:
// no request that waits is granted in between, and the requests that now
// fit are granted (the readers queued before any writer).
type Downgrader interface {
	// Downgrade sets the hold's weight to weight, which is less than its
	// weight now, with the owner check done atomically by the store. It
	// returns an error wrapping ErrLost when the hold is no longer this
	// owner's.
	Downgrade(ctx context.Context, weight int64) error
}

// Passer is implemented by a Lease that can hand its hold to the next owner
// of the same Client without freeing it on the store: the store keeps the
// hold (under the first owner) and the new lease carries a fencing token
// greater than this one's. Package locker calls Pass, instead of Release,
// when a hold of a Client ends and the Client has a waiter for the name.
// Without it (or when Pass declines), package locker releases the hold and
// the waiter asks the store.
type Passer interface {
	// Pass ends this lease's hold and returns a lease for r.Owner, or nil
	// and no error when it may not pass the hold now (another process waits
	// first, the lease in the store is old, no fencing token is at hand):
	// package locker then calls Release. After Pass returned a lease,
	// package locker calls nothing more on this one.
	Pass(ctx context.Context, r Request) (Lease, error)
}

// BatchRenewer is implemented by drivers that can renew many leases in one
// round trip. Package locker's watchdog then renews together the leases of
// the driver that fall due within a short window, instead of one call per
// lease.
type BatchRenewer interface {
	// RenewBatch renews each item's lease to its TTL, with the owner check
	// of each done atomically by the store, and sets each item's Err as
	// Lease.Renew would return it: one lost lease does not fail the others.
	// The leases are this driver's. A call that failed as a whole sets
	// every Err.
	RenewBatch(ctx context.Context, items []RenewItem)
}

// RenewItem is one lease of a RenewBatch call.
type RenewItem struct {
	Lease Lease
	TTL   time.Duration
	Err   error // set by RenewBatch
}

// Capabilities declares what a driver supports. Package conformance runs the
// checks that each declared capability needs, and fails a driver whose
// declaration does not match its behaviour.
type Capabilities struct {
	// Fencing: Lease.Token strictly increases across the holders of a name,
	// also after the name was released and taken again. When false, Token
	// must return 0.
	Fencing bool

	// Notify: a waiter is woken by the store when the lock is released,
	// instead of polling. The driver implements Waiter or Watcher.
	Notify bool

	// FIFO: waiters of different Clients are granted the lock in the order
	// they joined the store's queue, and a release wakes only the next one.
	// The driver implements Waiter and QueueInspector.
	FIFO bool

	// LostSignal: Lease.Lost is non-nil and fires promptly — without
	// waiting for the next renewal — whenever the store drops the hold: its
	// key deleted (Inspector.ForceRelease, an administrator) and, for a
	// SessionLease driver, its session expired.
	LostSignal bool

	// Expiry: a hold that is neither renewed nor released is freed by the
	// store after its lease (or its session), so a crashed owner cannot
	// block others for ever.
	Expiry bool

	// SessionLease: the driver keeps its holds alive itself (a ZooKeeper or
	// etcd session with its own keepalive), so package locker does not
	// schedule renewals; Lease.Renew then only checks the hold.
	SessionLease bool

	// CrossProcess: holds are visible to other processes (every remote
	// store); false for an in-process driver.
	CrossProcess bool

	// Weighted: the driver takes requests of every Kind, with their Limit,
	// Weight and Value, and grants them by the rule that Kind describes;
	// its leases implement Downgrader and Proclaimer, its Inspector lists
	// every kind's holds with their values, and, if it keeps places for
	// polled waits (Request.Queue), it implements Dequeuer. Without it,
	// package locker refuses semaphores, read-write locks and elections
	// with ErrNotSupported.
	Weighted bool
}

// MaxNameLen is the longest lock name, in bytes, that package locker accepts.
// A driver may accept fewer and return ErrInvalidName for longer names.
const MaxNameLen = 512

// LogSetter is implemented by drivers whose store's client library logs.
// Package locker calls SetLogger with the Client's logger (locker.WithLogger;
// by default one that discards) before it calls anything else, and the
// driver sends the library's messages there: a driver prints nothing on
// stderr, with or without it.
type LogSetter interface {
	SetLogger(l *slog.Logger)
}

// Inspector is implemented by drivers that can list holds and release one by
// force, for admin tools. A driver without it cannot be inspected: package
// locker reports ErrNotSupported.
type Inspector interface {
	// Holds lists the current holds whose names start with prefix.
	Holds(ctx context.Context, prefix string) ([]Hold, error)

	// ForceRelease frees name whoever holds it; the holder's Lost fires if
	// the driver declares LostSignal. It returns an error wrapping
	// ErrNotHeld when nobody holds it.
	ForceRelease(ctx context.Context, name string) error
}

// Hold describes one current hold, as seen by an Inspector.
type Hold struct {
	Name    string
	Owner   string
	Token   uint64
	Expires time.Time // zero when the hold lives as long as a session

	// Kind, Limit and Weight are the hold's request's (Request.Kind); a
	// Mutex hold may leave Limit and Weight 0. Value is the hold's
	// (Request.Value, Proclaimer).
	Kind          Kind
	Limit, Weight int64
	Value         string
}

// QueueInspector is implemented by drivers that can count the owners
// waiting for a name in the store. Package conformance needs it to prove
// FIFO order (a driver that declares FIFO without it fails the suite), and
// uses it to see that a waiter has started waiting, and that one that gave up
// left nothing behind.
type QueueInspector interface {
	// Waiters returns how many owners are waiting for name in the store,
	// of every kind (Request.Kind), places of polled waits included.
	Waiters(ctx context.Context, name string) (int, error)
}

// CheckName checks name against the rules of every lock name: not empty, at
// most MaxNameLen bytes, valid UTF-8, no NUL byte. Package locker checks
// every name with it; a driver calls it where its own methods take a name
// from elsewhere (a Driver used without package locker), and narrows the
// rules with an error of its own that wraps ErrInvalidName.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidName, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidName)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: contains a NUL byte", ErrInvalidName)
	}
	return nil
}
