package redislock

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/redislock/internal/holds"
	"github.com/golocker/locker/redislock/internal/keys"
	"github.com/golocker/locker/redislock/internal/scripts"
)

// Holds implements backend.Inspector: it SCANs every master for the lock
// keys whose names start with prefix (on a Cluster, all masters at once)
// and reads each one's owner, token and remaining lease. Like every SCAN,
// it sees a hold that lasted the whole scan; one taken or released during
// it may or may not be listed. A hold of a chain is reported as the
// chain's hold of the moment: Redis has the chain's first.
func (d *Driver) Holds(ctx context.Context, prefix string) ([]backend.Hold, error) {
	var mu sync.Mutex
	var out []backend.Hold
	err := holds.ForEachMaster(ctx, d.client, func(ctx context.Context, c redis.Cmdable) error {
		hs, err := holds.Scan(ctx, c, d.keys, prefix)
		mu.Lock()
		out = append(out, hs...)
		mu.Unlock()
		return err
	})
	if err != nil {
		return nil, d.storeErr(err)
	}
	for i, h := range out {
		if st, ok := d.chains.State(h.Name); ok && st.Owner == h.Owner {
			out[i].Owner, out[i].Token = st.Holder, st.Token
		}
	}
	slices.SortFunc(out, func(a, b backend.Hold) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ForceRelease implements backend.Inspector: it frees the lock whoever
// holds it, handing it to the oldest waiter, if any, at once. A holder
// whose Driver watches its keys (the servers publish keyspace events:
// WithKeyspaceEvents) learns of it at once; otherwise at its next renewal
// (Lost closes, Unlock returns ErrLost).
func (d *Driver) ForceRelease(ctx context.Context, name string) error {
	if err := backend.CheckName(name); err != nil {
		return err
	}
	n, err := scripts.ForceRelease.Run(ctx, d.client, keys.Queued(d.keys.Lock(name))).Int64()
	if err != nil {
		return d.storeErr(err)
	}
	if n == 0 {
		return backend.ErrNotHeld
	}
	d.chains.ForcedOff(name)
	return nil
}

// Waiters implements backend.QueueInspector: how many owners, in every
// process, are in name's queue in Redis with a place that has not lapsed.
// A waiter is counted from its first call that finds the lock held.
// Package locker sends one waiter of a Client per name to the store; the
// Client's other waiters are not counted here.
func (d *Driver) Waiters(ctx context.Context, name string) (int, error) {
	if err := backend.CheckName(name); err != nil {
		return 0, err
	}
	n, err := scripts.Waiters.Run(ctx, d.client, keys.Queued(d.keys.Lock(name))).Int()
	if err != nil {
		return 0, d.storeErr(err)
	}
	return n, nil
}
