package locker

import (
	"context"
	"time"
)

// Mutex is a handle on one named lock. Like sync.Mutex, a Mutex shared by
// goroutines excludes them: a Lock waits while another owner holds the lock,
// in this process or any other. The owner of a hold is the caller's ctx
// (see WithOwner and Do): a Lock with a ctx whose owner holds the lock
// re-enters it, and the lock is freed when Unlock has been called as many
// times. A Lock with a ctx that carries no owner is an owner of its own. A
// Mutex is safe for concurrent use; make as many as you like, they are cheap.
//
// Unlike a sync.Mutex, a Mutex needs its Client and its name: make it with
// Client.NewMutex. The zero Mutex (var m locker.Mutex), and a nil *Mutex,
// hold nothing and never will: Lock, TryLock, LockTimeout, Unlock, Err and
// Do return ErrZeroMutex, Token and HoldCount 0, Lost nil, Name "".
type Mutex struct{ hd handle }

// Name returns the lock's name.
func (m *Mutex) Name() string {
	if m.zero() {
		return ""
	}
	return m.hd.key.name
}

// zero reports whether m was not made by NewMutex.
func (m *Mutex) zero() bool { return m == nil || m.hd.c == nil }

// HoldCount returns how many levels of the lock are held through this
// handle: 0 when it holds nothing, 1 after Lock, 2 after a re-entry...
func (m *Mutex) HoldCount() int {
	if m.zero() {
		return 0
	}
	m.hd.c.mu.Lock()
	defer m.hd.c.mu.Unlock()
	if m.hd.cur == nil {
		return 0
	}
	return int(m.hd.cur.levels)
}

// Token returns the fencing token of the hold taken through this handle, or
// 0 when it holds nothing or the driver has no fencing. Tokens of a name
// strictly increase from holder to holder: pass the token with every write
// to the resource the lock guards, and have the resource refuse a token
// lower than the highest it has seen. That is what makes a lock safe against
// an owner that was paused past its lease. Code that Do runs finds the token
// with HoldFromContext too.
func (m *Mutex) Token() uint64 {
	if m.zero() {
		return 0
	}
	m.hd.c.mu.Lock()
	defer m.hd.c.mu.Unlock()
	if m.hd.cur == nil {
		return 0
	}
	return m.hd.cur.token
}

// Lost returns a channel that is closed if the current hold is lost before
// its last Unlock: its lease ran out before a renewal succeeded, the store
// dropped it, a fixed lease ended, or the Client was closed. After Unlock it
// returns the channel of the hold just released, which a normal Unlock does
// not close. Before the first hold it returns nil.
func (m *Mutex) Lost() <-chan struct{} {
	if m.zero() {
		return nil
	}
	h := m.hd.latest()
	if h == nil {
		return nil
	}
	return h.lostChan()
}

// Err returns nil while the current hold lasts (or when there is none), and,
// once it is lost, the error that says why: it wraps ErrLost (or ErrClosed),
// with the cause — the renewals that failed and the store's last error, the
// store's report, the end of a fixed lease. After Unlock it is about the
// hold just released.
func (m *Mutex) Err() error {
	if m.zero() {
		return ErrZeroMutex
	}
	h := m.hd.latest()
	if h == nil {
		return nil
	}
	return h.lostErr()
}

// Lock waits until the lock is held or ctx ends; it then returns an error
// that matches ctx's error (and, if the store was failing, carries the
// store's last error). With a ctx whose owner holds the lock it re-enters at
// once; if that hold was lost it returns ErrLost, until Unlock has been
// called for every level of the hold.
func (m *Mutex) Lock(ctx context.Context) error {
	_, _, err := m.lockOp(ctx, "lock", true, 0)
	return err
}

// TryLock takes the lock if no other owner holds it, and never waits for
// another owner: it returns (false, nil) when the lock is held elsewhere, or
// another owner of the same Client holds it or is taking it.
func (m *Mutex) TryLock(ctx context.Context) (bool, error) {
	ok, _, err := m.lockOp(ctx, "trylock", false, 0)
	return ok, err
}

// LockTimeout waits at most wait for the lock. It returns (false, nil) when
// wait ran out, and an error when ctx ended or the store failed. A wait of
// zero or less tries once, as TryLock.
func (m *Mutex) LockTimeout(ctx context.Context, wait time.Duration) (bool, error) {
	ok, _, err := m.lockOp(ctx, "locktimeout", wait > 0, wait)
	return ok, err
}

func (m *Mutex) lockOp(ctx context.Context, op string, wait bool, timeout time.Duration) (bool, *hold, error) {
	if m.zero() {
		return false, nil, opErr(op, "", ErrZeroMutex)
	}
	return m.hd.lockOp(ctx, op, wait, timeout, nil)
}

// doLock implements doable.
func (m *Mutex) doLock(ctx context.Context, wait bool, timeout time.Duration) (held, error) {
	_, h, err := m.lockOp(ctx, mutexOps.of(wait, timeout), wait, timeout)
	if h == nil {
		return nil, err
	}
	return h, err
}

func (m *Mutex) lockName() string { return m.Name() }

// Unlock releases one level of the hold of ctx's owner: of the owner that
// ctx carries (WithOwner, Do), or, with a ctx that carries none, of a hold
// taken through this handle with a ctx that carried none (as with
// sync.Mutex, any goroutine may unlock it). The last level releases the lock
// on the store, owner-checked, or passes it to the next waiter of the same
// Client. The release runs even when ctx is already done (bounded by
// WithReleaseTimeout), so a deferred Unlock frees the lock after a
// cancellation. Unlock returns ErrNotHeld when ctx's owner holds nothing
// here, and ErrLost for each level of a hold that was lost.
func (m *Mutex) Unlock(ctx context.Context) error {
	if m.zero() {
		return opErr("unlock", "", ErrZeroMutex)
	}
	return m.hd.unlockOp(ctx, "unlock")
}
