package redislock

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
)

// scanCount is the COUNT hint of the SCANs behind Holds, and the size of
// the pipelined batches that read the holds found.
const scanCount = 500

// Holds implements backend.Inspector: it SCANs every master for the lock
// keys whose names start with prefix (on a Cluster, all masters at once)
// and reads each one's owner, token and remaining lease. Like every SCAN,
// it sees a hold that lasted the whole scan; one taken or released during
// it may or may not be listed.
func (d *Driver) Holds(ctx context.Context, prefix string) ([]backend.Hold, error) {
	var mu sync.Mutex
	var out []backend.Hold
	err := forEachMaster(ctx, d.client, func(ctx context.Context, c redis.Cmdable) error {
		hs, err := scanHolds(ctx, c, d.keys, prefix)
		mu.Lock()
		out = append(out, hs...)
		mu.Unlock()
		return err
	})
	if err != nil {
		return nil, d.storeErr(err)
	}
	for i := range out {
		d.current(&out[i])
	}
	slices.SortFunc(out, func(a, b backend.Hold) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// forEachMaster calls fn with every master of c: each Cluster master in
// parallel, or c itself.
func forEachMaster(ctx context.Context, c redis.UniversalClient, fn func(context.Context, redis.Cmdable) error) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return fn(ctx, node) })
	}
	return fn(ctx, c)
}

// scanHolds lists the holds on one server.
func scanHolds(ctx context.Context, c redis.Cmdable, k keys, prefix string) ([]backend.Hold, error) {
	var out []backend.Hold
	var batch []string
	flush := func() error {
		hs, err := readHolds(ctx, c, k, batch)
		out = append(out, hs...)
		batch = batch[:0]
		return err
	}
	it := c.ScanType(ctx, 0, k.pattern(prefix), scanCount, "hash").Iterator()
	for it.Next(ctx) {
		key := it.Val()
		if name, ok := k.name(key); ok && strings.HasPrefix(name, prefix) {
			batch = append(batch, key)
		}
		if len(batch) == scanCount {
			if err := flush(); err != nil {
				return out, err
			}
		}
	}
	if err := it.Err(); err != nil {
		return out, err
	}
	if len(batch) > 0 {
		return out, flush()
	}
	return out, nil
}

// readHolds reads the owner, token and remaining lease of lock keys in one
// pipeline. Keys gone since the SCAN are skipped.
func readHolds(ctx context.Context, c redis.Cmdable, k keys, lockKeys []string) ([]backend.Hold, error) {
	fields := make([]*redis.SliceCmd, len(lockKeys))
	ttls := make([]*redis.DurationCmd, len(lockKeys))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, key := range lockKeys {
			fields[i] = p.HMGet(ctx, key, "owner", "token")
			ttls[i] = p.PTTL(ctx, key)
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, err
	}
	now := time.Now()
	var out []backend.Hold
	for i, key := range lockKeys {
		v := fields[i].Val()
		if len(v) != 2 {
			continue
		}
		owner, ok := v[0].(string)
		if !ok {
			continue
		}
		name, _ := k.name(key)
		h := backend.Hold{Name: name, Owner: owner}
		if s, ok := v[1].(string); ok {
			h.Token, _ = strconv.ParseUint(s, 10, 64)
		}
		if left := ttls[i].Val(); left > 0 {
			h.Expires = now.Add(left)
		}
		out = append(out, h)
	}
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
	key := d.keys.lock(name)
	n, err := forceReleaseScript.Run(ctx, d.client, scriptKeys(key)).Int64()
	if err != nil {
		return d.storeErr(err)
	}
	if n == 0 {
		return backend.ErrNotHeld
	}
	d.forcedOff(name)
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
	n, err := waitersScript.Run(ctx, d.client, scriptKeys(d.keys.lock(name))).Int()
	if err != nil {
		return 0, d.storeErr(err)
	}
	return n, nil
}

// forcedOff records that name was freed by force.
func (d *Driver) forcedOff(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.chains[name]; c != nil {
		c.forcedOff()
	}
}

// current replaces the owner and token of a hold that Redis has for a
// chain of the Driver by those of the chain's hold now: Redis has the
// chain's first hold.
func (d *Driver) current(h *backend.Hold) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.chains[h.Name]; c != nil && c.cur != 0 && c.owner == h.Owner {
		h.Owner, h.Token = c.curOwner, c.cur
	}
}
