// Package locker is a portable API for distributed locks.
//
// A Client wraps one driver (Redis, ZooKeeper, etcd, SQL, MongoDB, or the
// in-process driver) chosen by URL or built in code; its handles (*Mutex)
// implement Locker. Everything a lock needs beyond the store's atomic
// operations lives here once, for every driver: the waiting (one queue per
// name per Client), ownership and reentrancy, the watchdog that renews
// leases, the lost-hold signal, release after a cancelled acquisition,
// input validation and error wrapping.
//
//	c, err := locker.Open(ctx, os.Getenv("LOCKER_URL")) // e.g. "redis://127.0.0.1:6379/0"
//	if err != nil { ... }
//	defer c.Close()
//	m := c.NewMutex("orders/42", locker.WithTTL(10*time.Second))
//	err = locker.Do(ctx, m, func(ctx context.Context) error {
//		// ctx is cancelled if the hold is lost; send the fencing token
//		// (locker.HoldFromContext(ctx)) to the store you write to, so a
//		// stale owner's writes can be refused.
//		return nil
//	})
//
// # Ownership
//
// A *Mutex shared by goroutines excludes them, as a sync.Mutex does: declare
// one for a lock and use it everywhere. The owner of a hold is not the handle
// but the caller's ctx. A Lock from a ctx that carries no owner is an owner
// of its own, so a second Lock of the same handle waits (until the first is
// unlocked or its ctx ends); any ctx without an owner may unlock it, as any
// goroutine may unlock a sync.Mutex. Reentrancy follows the call chain: Do
// puts an owner in the ctx it passes on, and WithOwner puts one in
// explicitly; a Lock, TryLock, LockTimeout or Do with a ctx whose owner holds
// the lock re-enters it (the hold count grows, the fencing token stays), and
// the lock is freed after as many Unlocks with that ctx. An Unlock from a ctx
// that does not own the hold returns ErrNotHeld. Handles of one name on one
// Client are one lock.
//
// # Primitives
//
// Besides Mutex: Semaphore (at most N permits at once, each grant a
// Permit with its own lease, token and loss), RWMutex (readers share, a
// writer excludes everyone and is not starved; Downgrade), and MultiLock
// (several Mutexes as one, all or nothing, in one order: LockAll), and
// Election (one leader at a time, fenced terms, Leader, Observe, Run). They
// need a driver that declares backend.Capabilities.Weighted, except
// MultiLock. A Mutex, a Semaphore, an RWMutex and an Election of one name
// are different locks.
//
// # Leases and the watchdog
//
// Every hold has a lease (DefaultTTL unless WithTTL). While the owner lives,
// one scheduler per Client renews every lease at TTL/3 (in batches, where the
// driver can), retrying transient failures. If the lease could run out before a renewal succeeds, the hold is
// declared lost: Lost closes and Do's ctx is cancelled a safety margin
// (TTL/10) before the lease's end as measured from the moment the request
// was sent, so the owner hears of it before another owner can be granted
// the lock. WithFixedLease turns renewal off.
//
// # URLs
//
// Open picks a driver by the URL's scheme; drivers register themselves when
// their package is imported (see Register):
//
//	mem://[namespace]                  locallock, in-process
//	redis://, rediss://, redis+sentinel://, redis+cluster://, redlock://
//	etcd://h1:2379,h2:2379/prefix
//	zk://h1:2181,h2:2181/prefix
//	mysql://, postgres://, sqlite:///path
//	mongodb://, mongodb+srv://
//
// The in-process driver (mem://) does not exclude other processes: Open
// refuses it outside tests unless the URL says ?single_process=true, and
// RequireCrossProcess refuses it always.
//
// # Observing
//
// WithObserver sees every acquisition, end of a hold and renewal (package
// otellocker turns them into OpenTelemetry metrics and spans); WithLostHook
// hears of lost holds only; WithLogger receives the drivers' and the
// watchdog's log lines, which are discarded by default.
package locker

import (
	"context"
	"time"
)

// Locker is one named lock. *Mutex implements it.
type Locker interface {
	// Lock waits until the lock is held or ctx ends. A nil error means the
	// lock is held.
	Lock(ctx context.Context) error
	// TryLock takes the lock if no other owner holds it, without waiting.
	TryLock(ctx context.Context) (bool, error)
	// LockTimeout waits at most wait for the lock: (false, nil) when the wait
	// ran out, an error when ctx ended or the store failed.
	LockTimeout(ctx context.Context, wait time.Duration) (bool, error)
	// Unlock releases one level of the hold.
	Unlock(ctx context.Context) error
}

var _ Locker = (*Mutex)(nil)
