package keyspace

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// run is the worker: it subscribes new keys, checks suspect ones and
// sweeps, until close.
func (w *Watcher) run() {
	defer w.wg.Done()
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	ripe := time.NewTimer(time.Hour)
	ripe.Stop()
	defer ripe.Stop()
	backoff := checkRetry
	if w.cluster != nil {
		w.openMasters()
	}
	for {
		select {
		case <-w.base.Done():
			return
		case <-w.kick:
		case <-retry.C:
		case <-ripe.C:
		case <-sweep.C:
			w.sweep()
		}
		if next := w.ripen(time.Now()); !next.IsZero() {
			// The holds of a busy Driver are due one after another:
			// take them in batches, each a little late.
			ripe.Reset(max(time.Until(next), watchAfter/4))
		}
		w.subscribeFresh()
		if w.check() {
			backoff = checkRetry
			continue
		}
		retry.Reset(backoff)
		backoff = min(2*backoff, maxCheckRetry)
	}
}

// ctx is a context for one call of the worker, ended by close.
func (w *Watcher) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(w.base, watchTimeout)
}

// subscribeFresh subscribes the keys held but not yet subscribed, each on
// its node, in one SUBSCRIBE per node.
func (w *Watcher) subscribeFresh() {
	w.mu.Lock()
	fresh := w.fresh
	w.fresh = nil
	w.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	ctx, cancel := w.ctx()
	defer cancel()
	byNode := make(map[*node][]string)
	for _, key := range fresh {
		n, err := w.nodeOf(ctx, key)
		w.mu.Lock()
		e := w.keys[key]
		if e == nil || !e.fresh {
			w.mu.Unlock()
			continue
		}
		if err != nil {
			// No node to subscribe on yet (a Cluster without a master for
			// the slot, or the Driver closing): the sweep tries again.
			w.mu.Unlock()
			continue
		}
		e.fresh, e.n = false, n
		n.keys++
		w.mu.Unlock()
		byNode[n] = append(byNode[n], w.prefix+key)
	}
	for n, chans := range byNode {
		// The SUBSCRIBE is written, not awaited: its confirmation, read
		// by the node's listener, starts the check. A connection that is
		// down keeps the channels for go-redis's next reconnect.
		_ = n.ps.Subscribe(ctx, chans...)
	}
	w.mu.Lock()
	for _, key := range fresh {
		if e := w.keys[key]; e != nil && e.fresh && e.n == nil {
			// Not subscribed: the next round tries again.
			w.fresh = append(w.fresh, key)
		}
	}
	w.mu.Unlock()
}

// nodeOf returns the connection on which to watch key: the one node, or
// the connection to the master of key's slot, opened on first use.
func (w *Watcher) nodeOf(ctx context.Context, key string) (*node, error) {
	if w.cluster == nil {
		return w.nodeFor("", func() *redis.PubSub { return w.client.Subscribe(context.Background()) }), nil
	}
	c, err := w.cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	return w.nodeFor(c.Options().Addr, func() *redis.PubSub { return c.Subscribe(context.Background()) }), nil
}

// openMasters opens a connection to each master of the Cluster that has
// none, and returns the masters' addresses (nil when go-redis could not
// list them).
func (w *Watcher) openMasters() map[string]bool {
	ctx, cancel := w.ctx()
	defer cancel()
	var mu sync.Mutex
	addrs := map[string]bool{}
	err := w.cluster.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		addr := c.Options().Addr
		mu.Lock()
		addrs[addr] = true
		mu.Unlock()
		w.nodeFor(addr, func() *redis.PubSub { return c.Subscribe(context.Background()) })
		return nil
	})
	if err != nil {
		return nil
	}
	return addrs
}

// nodeFor returns the node of addr, made with open if it has none.
func (w *Watcher) nodeFor(addr string, open func() *redis.PubSub) *node {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nodeForLocked(addr, open)
}

// nodeForLocked is nodeFor with w.mu held.
func (w *Watcher) nodeForLocked(addr string, open func() *redis.PubSub) *node {
	if n := w.nodes[addr]; n != nil {
		return n
	}
	n := &node{addr: addr, ps: open(), done: make(chan struct{})}
	msgs := n.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	go w.listen(n, msgs)
	w.nodes[addr] = n
	return n
}

func (n *node) close() {
	_ = n.ps.Close()
	<-n.done
}

// listen reads a node's events and confirmations until its PubSub is
// closed.
func (w *Watcher) listen(n *node, msgs <-chan any) {
	defer close(n.done)
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Message:
			if mayEndHold(m.Payload) {
				w.suspectKey(strings.TrimPrefix(m.Channel, w.prefix))
			}
		case *redis.Subscription:
			// A new subscription, or one go-redis made again after a
			// reconnect: what happened before it was not seen.
			if m.Kind == "subscribe" {
				w.suspectKey(strings.TrimPrefix(m.Channel, w.prefix))
			}
		}
	}
}
