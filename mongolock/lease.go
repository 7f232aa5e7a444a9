package mongolock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/golocker/locker/internal/driverkit"
)

// lease is one hold: its Grant, and the Driver that renews and releases
// it.
type lease struct {
	driverkit.Grant
	d *Driver
	// expires is, in ModeHistory, the end of the lease on the server's
	// clock (Unix ns) as the acquisition or the last renewal that
	// succeeded wrote it.
	expires atomic.Int64
}

// Renew extends the lease to ttl from the server's now, if the lock is
// still this owner's and its lease has not run out.
func (l *lease) Renew(ctx context.Context, ttl time.Duration) error {
	octx, cancel := opCtx(ctx)
	defer cancel()
	return ctxError(ctx, l.d.store.renew(octx, l, ttl))
}

// Release frees the lock if it is still this owner's and its lease has not
// run out; the fence survives.
func (l *lease) Release(ctx context.Context) error {
	octx, cancel := opCtx(ctx)
	defer cancel()
	return ctxError(ctx, l.d.store.release(octx, l))
}
