package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/redislock/internal/keys"
	"github.com/golocker/locker/redislock/internal/scripts"
)

// acquireReplicated runs the acquire script and, when this call granted
// the lock, WAIT on the same connection: WAIT counts the replicas that have
// the writes of the connection it is sent on. If fewer than asked
// acknowledged within the timeout, it releases the lock again and reports
// ErrNotReplicated; cleaned then tells the caller that no release is left
// to do. A lock handed to the owner by another call (status 2) is
// confirmed by confirmReplicated.
func (d *Driver) acquireReplicated(ctx context.Context, l *lease, args []any) (res any, cleaned bool, err error) {
	node, err := d.masterFor(ctx, l.key)
	if err != nil {
		return nil, true, err // nothing was sent
	}
	conn := node.Conn()
	defer conn.Close()
	res, err = scripts.QueueAcquire.Run(ctx, conn, keys.Queued(l.key), args...).Result()
	if err != nil {
		d.movedSlot(ctx, err)
		return nil, false, err
	}
	if a, perr := scripts.ParseAcquire(res); perr != nil || a.Status != 1 {
		return res, false, perr
	}
	if err := d.waitReplicasOn(ctx, conn, l); err != nil {
		return nil, true, err
	}
	return res, false, nil
}

// confirmReplicated makes sure that a lock handed to l's owner by another
// call has reached the replicas: it renews the lease on a connection of
// its own, then WAITs for that write, which replicates after the grant.
// On failure the caller leaves the queue, which releases the lock.
func (d *Driver) confirmReplicated(ctx context.Context, l *lease, ttl time.Duration) error {
	node, err := d.masterFor(ctx, l.key)
	if err != nil {
		return err
	}
	conn := node.Conn()
	defer conn.Close()
	n, err := scripts.Renew.Run(ctx, conn, []string{l.key}, l.owner, scripts.MS(ttl)).Int64()
	if err != nil {
		d.movedSlot(ctx, err)
		return d.storeErr(err)
	}
	if err := scripts.OwnerReply(n); err != nil {
		return fmt.Errorf("redislock: the lock handed to this owner was gone before WAIT: %w", err)
	}
	return d.waitReplicasOn(ctx, conn, l)
}

// waitReplicasOn WAITs on conn for the replicas that WithWaitReplicas asks
// for, and releases l when too few acknowledged.
func (d *Driver) waitReplicasOn(ctx context.Context, conn *redis.Conn, l *lease) error {
	n, werr := conn.Wait(ctx, d.opts.WaitReplicas, d.opts.WaitTimeout).Result()
	if werr == nil && n >= int64(d.opts.WaitReplicas) {
		return nil
	}
	d.cleanup(ctx, l)
	if werr != nil {
		return fmt.Errorf("redislock: WAIT for %d replicas after acquiring (the lock was released): %w", d.opts.WaitReplicas, werr)
	}
	return fmt.Errorf("%w: %d of %d within %v (the lock was released)", ErrNotReplicated, n, d.opts.WaitReplicas, d.opts.WaitTimeout)
}

// movedSlot lets a cluster client learn where a slot went after MOVED or
// ASK.
func (d *Driver) movedSlot(ctx context.Context, err error) {
	if cc, ok := d.client.(*redis.ClusterClient); ok && (redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")) {
		cc.ReloadState(ctx)
	}
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
