package locker

import "context"

// owner is who holds a lock: the ctx-carried owner of WithOwner or Do, or,
// for a Lock from a ctx that carries none, anonOwner. Owners compare by
// address; holds of anonOwner belong to the handle that took them
// (hold.owns), which a ctx without an owner may unlock.
type owner struct{ anon bool }

// anonOwner owns the holds taken with a ctx that carries no owner.
var anonOwner = &owner{anon: true}

type ctxKey struct{}

// ctxVal is what a ctx carries: an owner, and the hold that Do passes on.
type ctxVal struct {
	owner  *owner
	hold   *hold // nil for WithOwner
	parent *ctxVal
}

func valueOf(ctx context.Context) *ctxVal {
	v, _ := ctx.Value(ctxKey{}).(*ctxVal)
	return v
}

// ownerOf returns the owner ctx carries, or nil.
func ownerOf(ctx context.Context) *owner {
	if v := valueOf(ctx); v != nil {
		return v.owner
	}
	return nil
}

// WithOwner returns a copy of ctx that carries a new owner. Lock, TryLock,
// LockTimeout and Do called with it, or with a ctx derived from it, act for
// that owner: on a lock the owner holds they re-enter it (the hold count
// grows, the fencing token stays), and Unlock with it releases one level of
// the owner's hold. Use it where code locks, then locks again further down
// the same call chain:
//
//	ctx = locker.WithOwner(ctx)
//	if err := m.Lock(ctx); err != nil { ... }
//	defer m.Unlock(ctx)
//	update(ctx, m) // may Lock(ctx) and Unlock(ctx) m again
//
// Without an owner in ctx, every Lock is a new owner, and a second Lock of
// the same handle waits for the first to be unlocked, as with sync.Mutex.
// Do puts an owner in the ctx it passes on (the caller's, if it carried
// one), so code that Do runs re-enters without WithOwner.
func WithOwner(ctx context.Context) context.Context {
	return context.WithValue(ctx, ctxKey{}, &ctxVal{owner: &owner{}, parent: valueOf(ctx)})
}

// carry returns ctx carrying h, held by o: the ctx that Do passes on.
func (h *hold) carry(ctx context.Context, o *owner) context.Context {
	return context.WithValue(ctx, ctxKey{}, &ctxVal{owner: o, hold: h, parent: valueOf(ctx)})
}

// Hold is a lock held for the code that Do or Middleware runs, as
// HoldFromContext finds it: the name, the fencing token to send with every
// write to the resource the lock guards, and the signal that it was lost.
// The zero Hold holds nothing.
type Hold struct{ h *hold }

// HoldFromContext returns the hold that ctx carries — the innermost, when
// Do calls are nested — and whether there is one.
func HoldFromContext(ctx context.Context) (Hold, bool) {
	for v := valueOf(ctx); v != nil; v = v.parent {
		if v.hold != nil {
			return Hold{v.hold}, true
		}
	}
	return Hold{}, false
}

// Name returns the lock's name.
func (h Hold) Name() string {
	if h.h == nil {
		return ""
	}
	return h.h.hd.key.name
}

// Token returns the hold's fencing token (0 when the driver has no
// fencing): pass it with every write to the resource the lock guards.
func (h Hold) Token() uint64 {
	if h.h == nil {
		return 0
	}
	return h.h.token
}

// Lost returns a channel that is closed if the hold is lost. For the zero
// Hold it returns nil.
func (h Hold) Lost() <-chan struct{} {
	if h.h == nil {
		return nil
	}
	return h.h.lostChan()
}

// Err returns nil while the hold lasts, and an error wrapping ErrLost (or
// ErrClosed) once it is lost.
func (h Hold) Err() error {
	if h.h == nil {
		return ErrNotHeld
	}
	return h.h.lostErr()
}
