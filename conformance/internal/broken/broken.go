// Package broken holds deliberately wrong drivers, each breaking one
// contract, so that a test can prove the conformance suite catches them.
// They wrap the in-process driver and change one behaviour each.
package broken

import (
	"context"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/locallock"
)

// Kinds of broken driver.
const (
	// NoOwnerCheck releases and renews whoever holds the lock.
	NoOwnerCheck = "no-owner-check"
	// ConstantTokens declares Fencing but returns the same token each time.
	ConstantTokens = "constant-tokens"
	// IgnoresCtx waits for the lock without looking at ctx.
	IgnoresCtx = "ignores-ctx"
	// OverDeclares claims FIFO and a lost signal it does not have.
	OverDeclares = "over-declares"
)

// Kinds lists every broken driver.
var Kinds = []string{NoOwnerCheck, ConstantTokens, IgnoresCtx, OverDeclares}

// New returns a broken driver of kind on store.
func New(kind string, store *locallock.Store) backend.Driver {
	return &driver{Driver: locallock.New(store), kind: kind}
}

type driver struct {
	*locallock.Driver
	kind string
}

func (d *driver) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	if d.kind == OverDeclares {
		// Hide the queue and the lost channel while still claiming them.
		c.Inspect = false
	}
	return c
}

func (d *driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if d.kind == IgnoresCtx {
		ctx = context.Background()
	}
	l, err := d.Driver.Acquire(ctx, r)
	if err != nil {
		return nil, err
	}
	return &lease{Lease: l, d: d, name: r.Name}, nil
}

type lease struct {
	backend.Lease
	d    *driver
	name string
}

func (l *lease) Token() uint64 {
	if l.d.kind == ConstantTokens {
		return 7
	}
	return l.Lease.Token()
}

func (l *lease) Lost() <-chan struct{} {
	if l.d.kind == OverDeclares {
		return nil
	}
	return l.Lease.Lost()
}

func (l *lease) Renew(ctx context.Context, ttl time.Duration) error {
	if l.d.kind == NoOwnerCheck {
		return nil
	}
	return l.Lease.Renew(ctx, ttl)
}

func (l *lease) Release(ctx context.Context) error {
	if l.d.kind == NoOwnerCheck {
		// Frees whoever holds the name, as a DEL without an owner check
		// would.
		err := l.d.ForceRelease(ctx, l.name)
		if err == backend.ErrNotHeld {
			return nil
		}
		return err
	}
	return l.Lease.Release(ctx)
}
