package locker

import (
	"context"
	"time"

	"github.com/golocker/locker/backend"
)

// RWMutex is a handle on a named read-write lock: read holds share it,
// a write hold excludes every other hold, in this process and any other.
// It prefers writers: once a writer waits, readers that come after it wait
// behind it, so overlapping readers cannot starve it, and a writer that
// gives up lets them in at once. Holds are granted in arrival order.
//
// Ownership and reentrancy follow the ctx, as for Mutex (see WithOwner and
// Do). An owner that holds the write lock may Lock again (one more write
// level) and RLock (a read level of the same hold); Unlock of its last
// write level while it still has read levels downgrades the hold to a read
// hold, as Downgrade does. An owner that holds only read levels gets
// ErrUpgrade at once from Lock, instead of waiting for itself. Without an
// owner in ctx every RLock and Lock is an owner of its own, as with
// sync.RWMutex: a goroutine that holds the write lock and calls RLock with
// such a ctx waits for itself.
//
// Every hold, read or write, has a lease that the watchdog renews, a
// fencing token and a lost signal. Tokens grow from grant to grant: a
// write hold's token is greater than those of every hold before it, so a
// resource that refuses a write below the highest token it has seen, and a
// read below the highest write token it has seen, refuses the stale holders.
//
// An RWMutex and a Mutex (or Semaphore) of the same name are different
// locks. Make one with Client.NewRWMutex; the zero RWMutex returns
// ErrZeroHandle.
type RWMutex struct {
	w handle // the write side: all of the name's units
	r handle // the read side: one unit
}

// NewRWMutex returns a handle on the read-write lock name. Options
// override the Client's defaults. A bad name or option, or a driver that
// has no read-write locks, does not panic: every method returns the error.
func (c *Client) NewRWMutex(name string, opts ...Option) *RWMutex {
	rw := &RWMutex{w: c.newHandle(lockKey{backend.RWMutex, name}, backend.RWLimit, backend.RWLimit, opts)}
	rw.r = rw.w
	rw.r.weight, rw.r.read = 1, true
	rw.w.pair, rw.r.pair = &rw.r, &rw.w
	return rw
}

func (rw *RWMutex) zero() bool { return rw == nil || rw.w.c == nil }

// Name returns the lock's name.
func (rw *RWMutex) Name() string {
	if rw.zero() {
		return ""
	}
	return rw.w.key.name
}

func (rw *RWMutex) lockName() string { return rw.Name() }

// side returns the handle of one side, or the error of a zero RWMutex.
func (rw *RWMutex) side(read bool) (*handle, error) {
	switch {
	case rw.zero():
		return nil, ErrZeroHandle
	case read:
		return &rw.r, nil
	}
	return &rw.w, nil
}

// acquireOp is an acquisition of one side.
func (rw *RWMutex) acquireOp(ctx context.Context, read, wait bool, timeout time.Duration) (bool, *hold, error) {
	names := mutexOps
	if read {
		names = readOps
	}
	op := names.of(wait, timeout)
	hd, err := rw.side(read)
	if err != nil {
		return false, nil, opErr(op, "", err)
	}
	return hd.lockOp(ctx, op, wait, timeout, nil)
}

// Lock waits until the write lock is held or ctx ends, as Mutex.Lock does.
func (rw *RWMutex) Lock(ctx context.Context) error {
	_, _, err := rw.acquireOp(ctx, false, true, 0)
	return err
}

// TryLock takes the write lock if nobody holds the lock or waits for it,
// without waiting.
func (rw *RWMutex) TryLock(ctx context.Context) (bool, error) {
	ok, _, err := rw.acquireOp(ctx, false, false, 0)
	return ok, err
}

// LockTimeout waits at most wait for the write lock, as Mutex.LockTimeout
// does.
func (rw *RWMutex) LockTimeout(ctx context.Context, wait time.Duration) (bool, error) {
	ok, _, err := rw.acquireOp(ctx, false, wait > 0, wait)
	return ok, err
}

// Unlock releases one write level of the hold of ctx's owner (as
// Mutex.Unlock does). The last write level of a hold that still has read
// levels downgrades it to a read hold.
func (rw *RWMutex) Unlock(ctx context.Context) error {
	hd, err := rw.side(false)
	if err != nil {
		return opErr("unlock", "", err)
	}
	return hd.unlockOp(ctx, "unlock")
}

// RLock waits until a read hold is granted or ctx ends: at once while only
// readers hold the lock and no writer waits. With a ctx whose owner holds
// the lock (for reading or writing) it adds a read level to that hold.
func (rw *RWMutex) RLock(ctx context.Context) error {
	_, _, err := rw.acquireOp(ctx, true, true, 0)
	return err
}

// TryRLock takes a read hold if no writer holds or waits for the lock,
// without waiting.
func (rw *RWMutex) TryRLock(ctx context.Context) (bool, error) {
	ok, _, err := rw.acquireOp(ctx, true, false, 0)
	return ok, err
}

// RLockTimeout waits at most wait for a read hold: (false, nil) when the
// wait ran out.
func (rw *RWMutex) RLockTimeout(ctx context.Context, wait time.Duration) (bool, error) {
	ok, _, err := rw.acquireOp(ctx, true, wait > 0, wait)
	return ok, err
}

// RUnlock releases one read level of the hold of ctx's owner, or, with a
// ctx that carries none, of a read hold taken through this handle with a
// ctx that carried none. The last level releases the hold on the store.
func (rw *RWMutex) RUnlock(ctx context.Context) error {
	hd, err := rw.side(true)
	if err != nil {
		return opErr("runlock", "", err)
	}
	return hd.unlockOp(ctx, "runlock")
}

// Downgrade turns the write hold of ctx's owner into a read hold, at once
// and without letting anybody in between: its write levels become read
// levels (release them with RUnlock), it keeps its token and its lease, a
// writer that waits keeps waiting, and the readers queued before any writer
// are let in. It returns ErrNotHeld when ctx's owner holds no write level.
func (rw *RWMutex) Downgrade(ctx context.Context) error {
	const op = "downgrade"
	hd, err := rw.side(false)
	switch {
	case err != nil:
		return opErr(op, "", err)
	case ctx == nil:
		return opErr(op, hd.key.name, ErrNilContext)
	case hd.err != nil:
		return opErr(op, hd.key.name, hd.err)
	}
	c := hd.c
	o := ownerOf(ctx)
	c.mu.Lock()
	var h *hold
	if st := c.locks[hd.key]; st != nil {
		h = st.ownedBy(o, hd)
	}
	if h == nil {
		c.mu.Unlock()
		return opErr(op, hd.key.name, ErrNotHeld)
	}
	h.reads += h.levels
	h.levels = 0
	c.mu.Unlock()
	return opErr(op, hd.key.name, c.downgrade(ctx, h))
}

// Hold returns the hold of ctx's owner on the lock — or, with a ctx that
// carries no owner, the latest hold taken through this handle with such a
// ctx — and whether there is one: its token, its loss.
func (rw *RWMutex) Hold(ctx context.Context) (Hold, bool) {
	if rw.zero() || ctx == nil {
		return Hold{}, false
	}
	c := rw.w.c
	o := ownerOf(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.locks[rw.w.key]
	if st == nil {
		return Hold{}, false
	}
	for i := len(st.holds) - 1; i >= 0; i-- {
		if h := st.holds[i]; !h.ending && (h.owns(o, &rw.w) || h.owns(o, &rw.r)) {
			return Hold{h}, true
		}
	}
	return Hold{}, false
}

// doLock implements doable: Do takes the write lock.
func (rw *RWMutex) doLock(ctx context.Context, wait bool, timeout time.Duration) (held, error) {
	_, h, err := rw.acquireOp(ctx, false, wait, timeout)
	if h == nil {
		return nil, err
	}
	return h, err
}

// RLocker returns a Locker whose Lock and Unlock are rw's RLock and
// RUnlock (TryLock and LockTimeout likewise): Do(ctx, rw.RLocker(), fn)
// runs fn under a read hold.
func (rw *RWMutex) RLocker() Locker { return rlocker{rw} }

type rlocker struct{ rw *RWMutex }

func (r rlocker) Lock(ctx context.Context) error            { return r.rw.RLock(ctx) }
func (r rlocker) TryLock(ctx context.Context) (bool, error) { return r.rw.TryRLock(ctx) }
func (r rlocker) Unlock(ctx context.Context) error          { return r.rw.RUnlock(ctx) }
func (r rlocker) LockTimeout(ctx context.Context, wait time.Duration) (bool, error) {
	return r.rw.RLockTimeout(ctx, wait)
}
func (r rlocker) lockName() string { return r.rw.Name() }

func (r rlocker) doLock(ctx context.Context, wait bool, timeout time.Duration) (held, error) {
	_, h, err := r.rw.acquireOp(ctx, true, wait, timeout)
	if h == nil {
		return nil, err
	}
	return h, err
}

var _ Locker = (*RWMutex)(nil)
