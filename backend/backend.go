// Package backend defines the interfaces to be implemented by lock drivers for
// package locker.
//
// Most code should use package locker. A driver implements only what its store
// does natively: acquire a named lock for an owner (with or without waiting),
// renew and release that hold with an owner check, report its fencing token, and
// optionally signal when the store drops the hold. Everything else — reentrancy,
// the renewal scheduler, the lost-hold signal seen by users, option validation,
// error wrapping, the URL registry — lives once in package locker.
//
// A driver proves itself with package conformance, which runs the checks for
// each capability the driver declares and fails it when the declaration does not
// match what it does.
//
// # Optional interfaces
//
// Abilities that only some drivers have are small separate interfaces found by
// type assertion, as in database/sql/driver: see [Inspector].
package backend

import (
	"context"
	"time"
)

// Driver is one connection to a lock store. It must be safe for concurrent use.
type Driver interface {
	// Acquire takes the lock r.Name for the owner r.Owner with a lease of r.TTL.
	//
	// When r.Wait is false, Acquire never waits for another owner: it returns
	// ErrHeld at once if the lock is held. When r.Wait is true it waits until
	// the lock is granted or ctx ends, and then returns ctx.Err() (possibly
	// wrapped). A driver should be woken by the store when it can be (see
	// Capabilities.Notify) and must not wait longer than the holder's
	// remaining lease before trying again.
	//
	// A non-nil error means nothing is held for r.Owner: when a request may
	// have taken effect on the server although the call failed (a cancelled
	// ctx after the request was sent, a lost reply), the driver releases by
	// r.Owner before returning, with a context that is not the cancelled one.
	//
	// A driver does not implement reentrancy: package locker never calls
	// Acquire for an owner that already holds r.Name.
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
	// Name is the lock's name, validated by package locker: not empty, valid
	// UTF-8, at most MaxNameLen bytes. A driver that cannot store a
	// particular name returns an error wrapping ErrInvalidName.
	Name string

	// Owner identifies this hold. It is random and unique for every
	// acquisition, so a stale holder can never pass an owner check meant for
	// the next one.
	Owner string

	// TTL is the lease: the store frees the lock if the hold is not renewed
	// or released within TTL. Drivers whose holds live as long as a session
	// (Capabilities.SessionLease) may ignore it.
	TTL time.Duration

	// Wait says whether to wait for another owner to release.
	Wait bool
}

// Lease is one granted hold.
type Lease interface {
	// Token returns the fencing token of this hold: strictly greater than
	// every token granted before for the same name, or 0 when the driver
	// does not declare Capabilities.Fencing.
	Token() uint64

	// Start returns the local time from which the lease's TTL counts: a
	// time no later than when the store started the lease, normally when
	// the request that was granted was sent. For a waiting Acquire that is
	// the last attempt, not the start of the wait. Package locker declares
	// the hold lost before Start+TTL, so a Start that is too late would let
	// an owner believe it holds a lock that has expired.
	Start() time.Time

	// Renew extends the lease to ttl from the time the request is sent
	// (package locker notes that time before calling), with an owner check done
	// atomically by the store. It returns an error wrapping ErrLost when the
	// hold is no longer this owner's; any other error is treated as
	// transient and retried by package locker while the lease lasts.
	Renew(ctx context.Context, ttl time.Duration) error

	// Release frees the hold, with an owner check done atomically by the
	// store. It returns an error wrapping ErrLost when the hold was no
	// longer this owner's (it expired, or was forced off); the lock of
	// whoever holds it now is untouched.
	Release(ctx context.Context) error

	// Lost returns a channel that the driver closes when the store reports
	// that the hold is gone (a session expired, a key was deleted). It
	// returns nil when only Renew can tell, which is allowed only when
	// Capabilities.LostSignal is false.
	Lost() <-chan struct{}
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
	// instead of polling.
	Notify bool

	// FIFO: waiters are granted the lock in the order they began to wait,
	// and a release wakes only the next one.
	FIFO bool

	// LostSignal: Lease.Lost is non-nil and closes promptly when the store
	// drops the hold, without waiting for the next renewal.
	LostSignal bool

	// Expiry: a hold that is neither renewed nor released is freed by the
	// store after its lease, so a crashed owner cannot block others for
	// ever.
	Expiry bool

	// SessionLease: the driver keeps its holds alive itself (a ZooKeeper or
	// etcd session with its own keepalive), so package locker does not
	// schedule renewals; Lease.Renew then only checks the hold.
	SessionLease bool

	// Inspect: the driver implements Inspector.
	Inspect bool

	// CrossProcess: holds are visible to other processes (every remote
	// store); false for an in-process driver.
	CrossProcess bool
}

// MaxNameLen is the longest lock name, in bytes, that package locker accepts.
// A driver may accept fewer and return ErrInvalidName for longer names.
const MaxNameLen = 512

// Inspector is implemented by drivers that can list holds and release one by
// force, for admin tools. A driver without it cannot be inspected: package
// locker reports ErrNotSupported.
type Inspector interface {
	// Holds lists the current holds whose names start with prefix.
	Holds(ctx context.Context, prefix string) ([]Hold, error)

	// ForceRelease frees name whoever holds it. It returns an error wrapping
	// ErrNotHeld when nobody holds it.
	ForceRelease(ctx context.Context, name string) error
}

// Hold describes one current hold, as seen by an Inspector.
type Hold struct {
	Name    string
	Owner   string
	Token   uint64
	Expires time.Time // zero when the hold lives as long as a session
}

// QueueInspector is implemented by drivers that can count the owners
// waiting for a name. Package conformance needs it to prove FIFO order (a
// driver that declares FIFO without it fails the suite), and uses it, when
// present, to know that a waiter has started waiting instead of giving it
// time. A driver that does not queue across processes may count only its
// own local waiters, and must say so in its documentation.
type QueueInspector interface {
	// Waiters returns how many owners are waiting for name.
	Waiters(ctx context.Context, name string) (int, error)
}
