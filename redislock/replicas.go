package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// acquireReplicated runs the acquire script and, when it granted the lock,
// WAIT on the same connection: WAIT counts the replicas that have the
// writes of the connection it is sent on. If fewer than asked acknowledged
// within the timeout, it releases the lock again and reports
// ErrNotReplicated; cleaned then tells the caller that no release is left
// to do.
func (d *Driver) acquireReplicated(ctx context.Context, l *lease, ttl time.Duration) (res any, cleaned bool, err error) {
	node, err := d.masterFor(ctx, l.key)
	if err != nil {
		return nil, true, err // nothing was sent
	}
	conn := node.Conn()
	defer conn.Close()
	res, err = acquireScript.Run(ctx, conn, []string{l.key, fenceKey(l.key)}, l.owner, ms(ttl), "1").Result()
	if err != nil {
		if cc, ok := d.client.(*redis.ClusterClient); ok && (redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")) {
			// The slot moved under us: let the cluster client learn where.
			cc.ReloadState(ctx)
		}
		return nil, false, err
	}
	if granted, _, perr := parseAcquire(res); perr != nil || !granted {
		return res, false, perr
	}
	n, werr := conn.Wait(ctx, d.opts.waitReplicas, d.opts.waitTimeout).Result()
	if werr == nil && n >= int64(d.opts.waitReplicas) {
		return res, false, nil
	}
	d.cleanup(ctx, l)
	if werr != nil {
		return nil, true, fmt.Errorf("redislock: WAIT for %d replicas after acquiring (the lock was released): %w", d.opts.waitReplicas, werr)
	}
	return nil, true, fmt.Errorf("%w: %d of %d within %v (the lock was released)", ErrNotReplicated, n, d.opts.waitReplicas, d.opts.waitTimeout)
}

// masterFor returns the client of the master that serves key.
func (d *Driver) masterFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := d.client.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("redislock: WAIT needs a *redis.Client or *redis.ClusterClient, not %T", d.client)
}
