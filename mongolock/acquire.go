package mongolock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/golocker/locker/backend"
)

// Waiting polls, with capped exponential backoff and jitter.
const (
	minBackoff = 2 * time.Millisecond
	maxBackoff = 250 * time.Millisecond
)

// Acquire implements backend.Driver. One attempt is one findOneAndUpdate
// (ModeUpdate) or a few reads by _id and one insert (ModeHistory). A
// waiting Acquire then reads the holder's remaining lease and sleeps with
// backoff, never past that lease, and tries again when the lock looks
// free.
func (d *Driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if err := checkRequest(r); err != nil {
		return nil, err
	}
	octx, cancel := opCtx(ctx)
	defer cancel()
	l, err := d.acquire(octx, r)
	if err != nil {
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

func (d *Driver) acquire(ctx context.Context, r backend.Request) (*lease, error) {
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	b := backoff{next: minBackoff}
	for {
		l, rem, err := d.try(ctx, r)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, backend.ErrHeld) || !r.Wait {
			return nil, err
		}
		if err := d.waitFree(ctx, r.Name, rem, &b); err != nil {
			return nil, err
		}
	}
}

// try makes one attempt. A store whose granting request failed with an
// unknown outcome (ctx ended, connection lost, write concern not
// satisfied) has given back whatever it may have granted before it
// returns the error, so that an error never leaves a hold.
func (d *Driver) try(ctx context.Context, r backend.Request) (*lease, time.Duration, error) {
	return d.store.acquire(ctx, r)
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

// waitFree waits until the lock on name may be free: the holder's lease
// has run out, or the backoff says to look again. rem is the holder's
// remaining lease if the attempt read it.
func (d *Driver) waitFree(ctx context.Context, name string, rem time.Duration, b *backoff) error {
	for {
		if rem == unknown {
			var err error
			if rem, err = d.store.remaining(ctx, name); err != nil {
				return err
			}
		}
		if rem <= 0 {
			return nil
		}
		// Never past the holder's lease: a crashed holder sends nothing.
		t := time.NewTimer(min(b.step(), rem+time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-d.closed:
			t.Stop()
			return backend.ErrClosed
		case <-t.C:
		}
		rem = unknown
	}
}

// backoff is capped exponential backoff with jitter: each step is drawn
// from [next/2, next], and next doubles up to maxBackoff.
type backoff struct{ next time.Duration }

func (b *backoff) step() time.Duration {
	d := b.next/2 + rand.N(b.next/2+1)
	b.next = min(2*b.next, maxBackoff)
	return d
}

// cleanupAgain are the delays after which cleanup looks again, in the
// background, for a grant whose request reached the server only after the
// first look (a request abandoned on a cancelled ctx still runs there).
var cleanupAgain = []time.Duration{100 * time.Millisecond, time.Second}

// cleanup releases by owner, whatever the lease, a grant that may have
// happened although the attempt failed: at once with its own short
// deadline (ctx may be the cancelled one), and again in the background
// until Close. The owner is unique to the failed attempt, so a late
// release can free nothing else.
func (d *Driver) cleanup(ctx context.Context, r backend.Request) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	_ = d.store.releaseAny(cctx, r.Name, r.Owner)
	cancel()
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		for _, after := range cleanupAgain {
			t := time.NewTimer(after)
			select {
			case <-t.C:
			case <-d.closed:
				t.Stop()
				return
			}
			cctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			_ = d.store.releaseAny(cctx, r.Name, r.Owner)
			cancel()
		}
	}()
}
