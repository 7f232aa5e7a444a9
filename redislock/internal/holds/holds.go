// Package holds reads the holds of redislock's locks from Redis servers,
// for the Inspectors of the Driver and of RedLock.
package holds

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/redislock/internal/keys"
)

// scanCount is the COUNT hint of the SCANs, and the size of the pipelined
// batches that read the holds found.
const scanCount = 500

// ForEachMaster calls fn with every master of c: each Cluster master in
// parallel, or c itself.
func ForEachMaster(ctx context.Context, c redis.UniversalClient, fn func(context.Context, redis.Cmdable) error) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return fn(ctx, node) })
	}
	return fn(ctx, c)
}

// Scan lists the holds on one server of the locks under k whose names
// start with prefix: it SCANs for their keys and reads each one's owner,
// token and remaining lease. Like every SCAN, it sees a hold that lasted
// the whole scan; one taken or released during it may or may not be
// listed.
func Scan(ctx context.Context, c redis.Cmdable, k keys.Keys, prefix string) ([]backend.Hold, error) {
	var out []backend.Hold
	var batch []string
	flush := func() error {
		hs, err := read(ctx, c, k, batch)
		out = append(out, hs...)
		batch = batch[:0]
		return err
	}
	it := c.ScanType(ctx, 0, k.Pattern(prefix), scanCount, "hash").Iterator()
	for it.Next(ctx) {
		key := it.Val()
		if name, ok := k.Name(key); ok && strings.HasPrefix(name, prefix) {
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

// read reads the owner, token and remaining lease of lock keys in one
// pipeline. Keys gone since the SCAN are skipped.
func read(ctx context.Context, c redis.Cmdable, k keys.Keys, lockKeys []string) ([]backend.Hold, error) {
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
		name, _ := k.Name(key)
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
