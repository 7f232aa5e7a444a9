package mongolock

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
	"github.com/golocker/locker/internal/ticket"
)

// Acquire implements backend.Driver: one attempt, which never waits: one
// findOneAndUpdate with upsert (ModeUpdate), or a few reads by _id and one
// insert (ModeHistory). A held lock is a *backend.HeldError. The first
// attempt of a waiting acquisition (r.Since set) that does not get the
// lock takes a ticket in the lock's queue (fair.go); its later attempts
// read the lock first, and try only when it is free and their turn has
// come. The HeldError's Left then also says when to look again.
func (d *Driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if err := checkRequest(r); err != nil {
		return nil, err
	}
	octx, cancel := opCtx(ctx)
	defer cancel()
	if err := d.ready(octx); err != nil {
		return nil, ctxError(ctx, err)
	}
	a := attempt{Request: r, wait: !r.Since.IsZero()}
	var t *ticket.Turn
	if a.wait {
		t = d.turns.Get(r.Name, r.Owner)
	}
	needTicket := a.wait && t == nil
	if t != nil {
		if left := d.turns.NotYet(t); left > 0 {
			return nil, &backend.HeldError{Left: left}
		}
		a.ticket = t.Ticket
		if !d.turns.TryBlind(t) {
			s, err := d.store.look(octx, r.Name)
			if err != nil {
				return nil, ctxError(ctx, err)
			}
			if s.Exists && !s.WorthTrying(t.Ticket) {
				return nil, d.held(s, t)
			}
			needTicket = s.Exists && (t.Ticket < s.Serving || t.Ticket > s.Tickets)
			if needTicket {
				a.ticket = 0
			}
		}
	}
	l, s, err := d.store.acquire(octx, a)
	switch {
	case err != nil:
		return nil, ctxError(ctx, err)
	case l != nil:
		d.turns.Forget(r.Name, r.Owner)
		return l, nil
	case needTicket:
		ticket, ts, err := d.store.takeTicket(octx, r.Name)
		if err != nil {
			return nil, ctxError(ctx, err)
		}
		return nil, d.held(ts, d.turns.Record(r.Name, r.Owner, ticket))
	case !s.Exists && t != nil && d.turns.TryBlind(t):
		return nil, d.turns.HeadHeld(t, false)
	}
	if !s.Exists {
		if s, err = d.store.look(octx, r.Name); err != nil {
			return nil, ctxError(ctx, err)
		}
	}
	return nil, d.held(s, t)
}

// state is a lock as acquire returns it or look reads it.
type state = ticket.State

// held returns the HeldError of an attempt that found s. For a waiter with
// a ticket, Left is also bounded by when it should look again.
func (d *Driver) held(s state, t *ticket.Turn) error { return d.turns.Held(s, t, false) }

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
