package redislock

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
	"github.com/golocker/locker/internal/keyslot"
	"github.com/golocker/locker/redislock/internal/scripts"
)

// renewChunk is how many leases one renew_many.lua call renews at most: a
// script runs alone on its server, so a batch is cut in calls of a few
// milliseconds each.
const renewChunk = 500

// RenewBatch implements backend.BatchRenewer: the leases are grouped by
// Cluster slot (a script's keys must share one) and lease length, each
// group is cut in chunks of renewChunk, and every chunk is one
// renew_many.lua call, all sent in one pipeline: one round trip per server.
// Each lease is owner-checked on its own.
func (d *Driver) RenewBatch(ctx context.Context, items []backend.RenewItem) {
	sent := time.Now()
	type group struct {
		slot uint16
		ttl  time.Duration
	}
	type call struct {
		idx    []int
		leases []*lease
		keys   []string
		args   []any
		cmd    *redis.Cmd
	}
	_, cluster := d.client.(*redis.ClusterClient)
	key := func(l *lease, it backend.RenewItem) group {
		g := group{ttl: it.TTL}
		if cluster {
			g.slot = keyslot.Of(l.key)
		}
		return g
	}
	var calls []call
	pipe := d.client.Pipeline()
	driverkit.Batches(items, d, "redislock", func(l *lease) *Driver { return l.d }, key, renewChunk, func(g group, idx []int, leases []*lease) {
		c := call{idx: idx, leases: leases, keys: make([]string, len(idx)), args: make([]any, 1, len(idx)+1)}
		c.args[0] = scripts.MS(g.ttl)
		for j, l := range leases {
			c.keys[j] = l.key
			c.args = append(c.args, l.RedisOwner())
		}
		c.cmd = scripts.RenewMany.EvalSha(ctx, pipe, c.keys, c.args...)
		calls = append(calls, c)
	})
	_, _ = pipe.Exec(ctx)
	for _, c := range calls {
		res, err := c.cmd.Slice()
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			// The server does not know the script yet: EVAL loads it.
			res, err = scripts.RenewMany.Run(ctx, d.client, c.keys, c.args...).Slice()
		}
		for j, i := range c.idx {
			l := c.leases[j]
			if err != nil {
				items[i].Err = d.storeErr(err)
				continue
			}
			n, ok := int64(-1), false
			if j < len(res) {
				n, ok = res[j].(int64)
			}
			if !ok {
				items[i].Err = scripts.ErrReply
				continue
			}
			d.chains.Renewed(l.c, sent, n == 1)
			items[i].Err = scripts.OwnerReply(n)
		}
	}
}
