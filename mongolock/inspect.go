package mongolock

import (
	"context"

	"github.com/golocker/locker/backend"
)

// Holds implements backend.Inspector: the locks whose name starts with
// prefix, held by an owner whose lease has not run out. Expires is on the
// local clock (the server's expiry less the measured offset).
func (d *Driver) Holds(ctx context.Context, prefix string) ([]backend.Hold, error) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	if err := d.ready(octx); err != nil {
		return nil, ctxError(ctx, err)
	}
	hs, err := d.store.holds(octx, prefix)
	return hs, ctxError(ctx, err)
}

// ForceRelease implements backend.Inspector: it frees name whoever holds
// it (the fence survives), and returns ErrNotHeld if nobody does.
func (d *Driver) ForceRelease(ctx context.Context, name string) error {
	if err := backend.CheckName(name); err != nil {
		return err
	}
	octx, cancel := opCtx(ctx)
	defer cancel()
	if err := d.ready(octx); err != nil {
		return ctxError(ctx, err)
	}
	return ctxError(ctx, d.store.forceRelease(octx, name))
}
