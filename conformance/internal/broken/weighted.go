package broken

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/golocker/locker/backend"
)

// The faults of the broken drivers of the weighted primitives.

// rewrite changes a request as AliasesKinds, NoLimitCheck and
// NoWriterPreference do.
func (d *driver) rewrite(r backend.Request) backend.Request {
	switch {
	case d.kind == AliasesKinds && r.Kind != backend.Semaphore:
		// Every kind in the Semaphores' place: a Mutex is 1 of 1.
		if r.Kind == backend.Mutex {
			r.Limit, r.Weight = 1, 1
		}
		r.Kind = backend.Semaphore
	case d.kind == NoLimitCheck && r.Kind == backend.Semaphore:
		r.Name += "#limit=" + strconv.FormatInt(r.Limit, 10)
	case d.kind == NoWriterPreference && isWrite(r):
		r.Queue = false
	}
	return r
}

func isWrite(r backend.Request) bool { return r.Kind == backend.RWMutex && r.Weight == r.Limit }

// weightedWait returns the wait that replaces the store's native one, or
// nil.
func (d *driver) weightedWait(r backend.Request) func(context.Context, backend.Request) (backend.Lease, error) {
	switch {
	case r.Kind == backend.Mutex:
		return nil
	case d.kind == NoWriterPreference && isWrite(r), d.kind == KeepsPlace:
		// One attempt: package locker polls. A writer's attempt keeps no
		// place (rewrite); KeepsPlace's does, and Dequeue leaves it.
		return d.d.Acquire
	case d.kind == MissesWakeups && r.Weight > 1:
		return func(ctx context.Context, r backend.Request) (backend.Lease, error) {
			r.Queue = false
			l, err := d.d.Acquire(ctx, r)
			if !errors.Is(err, backend.ErrHeld) {
				return l, err
			}
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
	return nil
}

// Dequeue implements backend.Dequeuer, except for KeepsPlace.
func (d *driver) Dequeue(ctx context.Context, r backend.Request) error {
	if d.kind == KeepsPlace {
		return nil
	}
	return d.d.Dequeue(ctx, d.rewrite(r))
}

// granted runs the faults that begin with a weighted grant.
func (d *driver) granted(l *lease) {
	if l.req.Kind == backend.Mutex {
		return
	}
	switch d.kind {
	case PermitsOutliveHolders:
		stop := make(chan struct{})
		inner := l.Lease
		d.renewals.Add(1)
		go func() {
			defer d.renewals.Done()
			t := time.NewTicker(l.req.TTL / 3)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					_ = inner.Renew(context.Background(), l.req.TTL)
				case <-stop:
					return
				case <-d.closing:
					return
				}
			}
		}()
		l.stop = func() { close(stop) }
	case GrowsStore:
		// A record that nothing removes within the check.
		_, _ = d.d.Acquire(context.Background(), backend.Request{Name: "broken/record/" + l.owner, Owner: l.owner, TTL: time.Hour, Kind: backend.Mutex, Limit: 1, Weight: 1})
	}
}

// stopRenewals ends PermitsOutliveHolders' renewals: the driver is closed.
func (d *driver) stopRenewals() {
	select {
	case <-d.closing:
	default:
		close(d.closing)
	}
	d.renewals.Wait()
}

// renewRecreating is RenewRecreates' Renew.
func (l *lease) renewRecreating(ctx context.Context, ttl time.Duration) error {
	err := l.Lease.Renew(ctx, ttl)
	if !errors.Is(err, backend.ErrLost) || l.req.Kind == backend.Mutex {
		return err
	}
	r := l.req
	r.Queue = false
	nl, aerr := l.d.d.Acquire(ctx, r)
	if aerr != nil {
		return err
	}
	l.Lease = nl
	return nil
}

// Downgrade implements backend.Downgrader over the store's lease;
// DowngradeReleases releases and acquires again instead.
func (l *lease) Downgrade(ctx context.Context, weight int64) error {
	if l.d.kind == DowngradeReleases {
		if err := l.Lease.Release(ctx); err != nil {
			return err
		}
		r := l.req
		r.Weight, r.Queue = weight, false
		if nl, err := l.d.d.Acquire(ctx, r); err == nil {
			l.Lease, l.req = nl, r
		}
		return nil
	}
	dg, ok := l.Lease.(backend.Downgrader)
	if !ok {
		return backend.ErrNotSupported
	}
	err := dg.Downgrade(ctx, weight)
	if err == nil {
		l.req.Weight = weight
	}
	return err
}

// sameValue is ValueIsIdentity's fault: a phantom lease for a candidate
// whose value the leader has, or nil.
func (d *driver) sameValue(ctx context.Context, r backend.Request) backend.Lease {
	if d.kind != ValueIsIdentity || r.Kind != backend.Election {
		return nil
	}
	hs, _ := d.d.Holds(ctx, r.Name)
	for _, h := range hs {
		if h.Name == r.Name && h.Kind == backend.Election && h.Value == r.Value {
			return &phantom{token: h.Token}
		}
	}
	return nil
}

// Proclaim implements backend.Proclaimer over the store's lease;
// ProclaimNoCheck says yes whatever the store holds.
func (l *lease) Proclaim(ctx context.Context, value string) error {
	if l.d.kind == ProclaimNoCheck {
		return nil
	}
	p, ok := l.Lease.(backend.Proclaimer)
	if !ok {
		return backend.ErrNotSupported
	}
	return p.Proclaim(ctx, value)
}
