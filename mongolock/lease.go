package mongolock

import (
	"context"
	"time"
)

// lease is one hold of name by owner.
type lease struct {
	d           *Driver
	name, owner string
	token       uint64
	start       time.Time
}

// Token returns the fence of this grant.
func (l *lease) Token() uint64 { return l.token }

// Start returns when the granting request was sent.
func (l *lease) Start() time.Time { return l.start }

// Lost returns nil: without change streams (which the driver does not
// rely on) the server does not tell a client that its lock changed hands;
// the next renewal finds out.
func (l *lease) Lost() <-chan struct{} { return nil }

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
