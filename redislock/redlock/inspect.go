package redlock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/redislock/internal/holds"
	"github.com/golocker/locker/redislock/internal/keys"
	"github.com/golocker/locker/redislock/internal/scripts"
)

// Holds implements backend.Inspector: it lists the locks that a majority
// of the instances hold for one owner. Expires is when fewer than a
// majority will still hold it, if it is not renewed. Token is 0.
func (rl *Driver) Holds(ctx context.Context, prefix string) ([]backend.Hold, error) {
	type perInstance struct {
		holds []backend.Hold
		err   error
	}
	per := make([]perInstance, len(rl.clients))
	rl.each(ctx, inspectTimeout, func(ctx context.Context, i int, c redis.UniversalClient) (any, error) {
		var all []backend.Hold
		err := holds.ForEachMaster(ctx, c, func(ctx context.Context, n redis.Cmdable) error {
			hs, err := holds.Scan(ctx, n, rl.keys, prefix)
			all = append(all, hs...) // ForEachMaster of a non-cluster client calls fn once
			return err
		})
		per[i] = perInstance{holds: all, err: err}
		return nil, nil
	})
	var errs []error
	type nameOwner struct{ name, owner string }
	expiries := map[nameOwner][]time.Time{}
	for _, p := range per {
		if p.err != nil {
			errs = append(errs, closedErr(p.err))
			continue
		}
		for _, h := range p.holds {
			k := nameOwner{h.Name, h.Owner}
			expiries[k] = append(expiries[k], h.Expires)
		}
	}
	if len(errs) > len(rl.clients)-rl.quorum {
		return nil, fmt.Errorf("redislock: %d of %d instances could not be inspected: %w", len(errs), len(rl.clients), joinErrors(errs))
	}
	var out []backend.Hold
	for k, ex := range expiries {
		if len(ex) < rl.quorum {
			continue
		}
		// The quorum-th latest expiry: after it, fewer than a majority
		// hold the lock.
		slices.SortFunc(ex, func(a, b time.Time) int { return b.Compare(a) })
		out = append(out, backend.Hold{Name: k.name, Owner: k.owner, Expires: ex[rl.quorum-1]})
	}
	slices.SortFunc(out, func(a, b backend.Hold) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// inspectTimeout bounds one instance's part of Holds and ForceRelease.
const inspectTimeout = 30 * time.Second

// ForceRelease implements backend.Inspector: it deletes the lock on every
// instance, whoever holds it. It returns ErrNotHeld when no instance had
// it.
func (rl *Driver) ForceRelease(ctx context.Context, name string) error {
	if err := backend.CheckName(name); err != nil {
		return err
	}
	key := rl.keys.Lock(name)
	results := rl.each(ctx, inspectTimeout, func(ctx context.Context, _ int, c redis.UniversalClient) (any, error) {
		return scripts.ForceRelease.Run(ctx, c, keys.Queued(key)).Int64()
	})
	deleted, _, errs := tally(results)
	switch {
	case len(errs) > 0:
		return fmt.Errorf("redislock: force release on %d of %d instances failed (deleted on %d): %w", len(errs), len(rl.clients), deleted, joinErrors(errs))
	case deleted == 0:
		return backend.ErrNotHeld
	}
	return nil
}
