package mongolock

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// Acquire implements backend.Driver: one attempt, which never waits and
// keeps nothing for the next: one findOneAndUpdate with upsert
// (ModeUpdate), or a few reads by _id, an insert if the lock is free and,
// once granted, an update of the head (ModeHistory). A held lock is a
// *backend.HeldError with the holder's owner, fence and remaining lease;
// package locker decides when to try again.
func (d *Driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if err := checkRequest(r); err != nil {
		return nil, err
	}
	octx, cancel := opCtx(ctx)
	defer cancel()
	if err := d.ready(octx); err != nil {
		return nil, ctxError(ctx, err)
	}
	l, err := d.store.acquire(octx, r)
	if err != nil {
		var he *backend.HeldError
		if errors.As(err, &he) {
			return nil, err
		}
		return nil, ctxError(ctx, err)
	}
	return l, nil
}

// opCtx returns a context that ends when ctx ends but has no deadline, for
// the requests of one operation. With a deadline the Go driver sends
// maxTimeMS, and FerretDB 1.x answers a query it interrupts for maxTimeMS
// by leaving its SQLite connections interrupted: every later command
// fails. Without it the driver still abandons a request when ctx ends
// (closing its connection); a server goes on with a small command by _id
// for at most a moment.
func opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	octx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	return octx, func() {
		stop()
		cancel()
	}
}

// ctxError returns ctx's error for an error caused by ctx. The Go driver
// gives up a round trip before ctx's deadline when the time left cannot
// cover one: then ctx is about to end, and its own error is the answer.
func ctxError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !errors.Is(err, context.DeadlineExceeded) && !mongo.IsTimeout(err) {
		return err
	}
	dl, ok := ctx.Deadline()
	if !ok || time.Until(dl) > time.Second {
		return err
	}
	// ctx's own timer may fire a little after its deadline.
	t := time.NewTimer(time.Until(dl) + 100*time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return err
	}
}

// cleanup releases by owner, whatever the lease, a grant that may have
// happened although the attempt failed (driverkit.Cleanup).
func (d *Driver) cleanup(ctx context.Context, r backend.Request) {
	driverkit.Cleanup(ctx, d.life, func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
		defer cancel()
		_ = d.store.releaseAny(ctx, r.Name, r.Owner)
	})
}
