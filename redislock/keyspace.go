package redislock

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/keyslot"
)

// Lost holds (Capabilities.LostSignal). Redis tells a client that a key
// changed only through keyspace notifications, which a server publishes
// when its notify-keyspace-events setting asks for them: a Driver watches
// only when the servers publish them (WithKeyspaceEvents; Open asks).
//
// A Driver that watches subscribes to the keyspace channel of each key it
// holds, __keyspace@<db>__:<key>, on the master that has the key: unlike
// PUBLISH, keyspace events are not broadcast in a Cluster, each node
// publishes its own keys'. It subscribes once a hold has lasted
// watchAfter, and keeps a subscription for keepWatching after the key's
// last hold ended, so a name held again and again is subscribed once. A
// subscribed key costs its Driver a message for each write of its own
// scripts to it (an "expire" at each grant and renewal, a "del" at each
// release), which go-redis reads at a few µs of CPU each: holds shorter
// than watchAfter, as in a Lock/Unlock loop, never pay it, and a loss in
// a hold's first watchAfter is told by the check that follows the
// subscription (below), watchAfter and a round trip later. One worker
// goroutine sends the SUBSCRIBEs and the checks, off the caller's path;
// one listener per connection reads the events.
//
// An event names a key, not a hold: a "del" can be the Driver's own release
// of an earlier hold, or another owner's release from before this hold was
// granted, read late. So an event that may end a hold — any but the writes
// of the Driver's own scripts while a hold lasts — is checked against
// Redis: one pipelined HGET of the owners of the keys in question, and a
// hold's Lost fires only if Redis no longer has its owner. A newer hold of
// the same name has another owner, so it never fires for an older one. The
// same check runs when a subscription is confirmed: for a new one, the key
// could have been deleted between the grant and the SUBSCRIBE; after a
// reconnect (go-redis subscribes again by itself), events published while
// the connection was down are lost. One round trip covers every hold of
// the connection.
//
// Not seen: FLUSHALL and FLUSHDB, which publish no event per key, and
// fields of the hash changed by hand. The next renewal finds those.

// Timing of the watcher: a key is subscribed once its hold has lasted
// watchAfter (at most a quarter of it more: the worker takes the holds
// due in batches); a sweep unsubscribes keys that nobody held for
// keepWatching and, on a Cluster, follows keys whose slot moved; a check
// that failed is retried from checkRetry, doubling up to maxCheckRetry.
const (
	watchAfter    = 20 * time.Millisecond
	keepWatching  = 5 * time.Second
	sweepEvery    = time.Second
	watchTimeout  = 2 * time.Second // one SUBSCRIBE, UNSUBSCRIBE or check
	checkRetry    = 50 * time.Millisecond
	maxCheckRetry = time.Second
)

// watcher watches the keys of a Driver's holds.
type watcher struct {
	d       *Driver
	prefix  string               // of the keyspace channels: "__keyspace@<db>__:"
	cluster *redis.ClusterClient // nil: one node
	kick    chan struct{}        // capacity 1: work for the worker
	base    context.Context      // ended by close
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex
	started bool
	closed  bool
	keys    map[string]*watched // by lock key: held now, or lately
	nodes   map[string]*node    // by address; one, "", when not a Cluster
	fresh   []string            // keys held but not subscribed
	young   []young             // holds to watch at their due time, the oldest first
	suspect map[string]struct{} // keys to check with Redis
}

// watched is one watched key.
type watched struct {
	l      *lease    // the Driver's hold of the key now (a chain's current one); nil: none
	n      *node     // where its channel is subscribed; nil: not yet
	slot   uint16    // its Cluster slot
	fresh  bool      // in watcher.fresh
	idleAt time.Time // when its last hold ended
}

// young is a hold not yet watchAfter old whose key is not subscribed.
type young struct {
	key string
	l   *lease
	due time.Time
}

// node is a pub/sub connection to one server.
type node struct {
	addr string
	ps   *redis.PubSub
	keys int // watched keys subscribed here
	done chan struct{}
}

func newWatcher(d *Driver) *watcher {
	db := 0
	cc, _ := d.client.(*redis.ClusterClient)
	if c, ok := d.client.(*redis.Client); ok {
		db = c.Options().DB
	}
	base, cancel := context.WithCancel(context.Background())
	return &watcher{
		d:       d,
		prefix:  "__keyspace@" + strconv.Itoa(db) + "__:",
		cluster: cc,
		kick:    make(chan struct{}, 1),
		base:    base,
		cancel:  cancel,
		keys:    make(map[string]*watched),
		nodes:   make(map[string]*node),
		suspect: make(map[string]struct{}),
	}
}

// watch starts watching l's key for l, a hold that Redis just granted.
func (w *watcher) watch(l *lease) {
	l.lost = backend.NewLostSignal()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if !w.started {
		w.started = true
		if w.cluster == nil {
			// Its connection now, and for the Driver's life (no I/O
			// here: go-redis dials in the background).
			w.nodeForLocked("", func() *redis.PubSub { return w.d.client.Subscribe(context.Background()) })
		}
		w.wg.Add(1)
		go w.run()
	}
	e := w.keys[l.key]
	if e == nil {
		e = &watched{slot: keyslot.Of(l.key)}
		w.keys[l.key] = e
	}
	if e.l != nil {
		// Redis granted the key to l while it had the Driver's earlier
		// hold, which is neither released nor found lost yet (two Clients
		// on one Driver): that hold is gone.
		e.l.lost.Fire()
	}
	e.l = l
	if e.n == nil && !e.fresh {
		// Every hold waits as long: the queue stays in due order.
		w.young = append(w.young, young{key: l.key, l: l, due: time.Now().Add(watchAfter)})
		if len(w.young) == 1 {
			w.poke()
		}
	}
}

// ripen subscribes the keys whose holds, still held, have lasted
// watchAfter, and returns when the next hold is due (zero: none).
func (w *watcher) ripen(now time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := 0
	for ; i < len(w.young) && !w.young[i].due.After(now); i++ {
		y := w.young[i]
		// The same hold in Redis: y's, or one its chain passed it to.
		if e := w.keys[y.key]; e != nil && e.l != nil && e.l.redisOwner() == y.l.redisOwner() && e.n == nil && !e.fresh {
			e.fresh = true
			w.fresh = append(w.fresh, y.key)
		}
	}
	w.young = slices.Delete(w.young, 0, i)
	if len(w.young) == 0 {
		return time.Time{}
	}
	return w.young[0].due
}

// pass makes next, to which the chain of from passed the hold, the hold
// that a loss of the key fires.
func (w *watcher) pass(from, next *lease) {
	next.lost = backend.NewLostSignal()
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.keys[from.key]; e != nil && e.l == from {
		e.l = next
	}
	if from.lost.Fired() {
		// Redis lost the chain's hold before the pass (check fires under
		// w.mu): so has next.
		next.lost.Fire()
	}
}

// unwatch stops l's hold from being reported lost: it is being released.
func (w *watcher) unwatch(l *lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.keys[l.key]; e != nil && e.l == l {
		e.l, e.idleAt = nil, time.Now()
		if e.n == nil && !e.fresh {
			// Never subscribed: nothing to keep.
			delete(w.keys, l.key)
		}
	}
}

// poke wakes the worker. w.mu is held.
func (w *watcher) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// close ends the worker and the connections.
func (w *watcher) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	nodes := w.nodes
	w.nodes = nil
	w.mu.Unlock()
	for _, n := range nodes {
		n.close()
	}
}

// run is the worker: it subscribes new keys, checks suspect ones and
// sweeps, until close.
func (w *watcher) run() {
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
func (w *watcher) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(w.base, watchTimeout)
}

// subscribeFresh subscribes the keys held but not yet subscribed, each on
// its node, in one SUBSCRIBE per node.
func (w *watcher) subscribeFresh() {
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
func (w *watcher) nodeOf(ctx context.Context, key string) (*node, error) {
	if w.cluster == nil {
		return w.nodeFor("", func() *redis.PubSub { return w.d.client.Subscribe(context.Background()) }), nil
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
func (w *watcher) openMasters() map[string]bool {
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
func (w *watcher) nodeFor(addr string, open func() *redis.PubSub) *node {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nodeForLocked(addr, open)
}

// nodeForLocked is nodeFor with w.mu held.
func (w *watcher) nodeForLocked(addr string, open func() *redis.PubSub) *node {
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
func (w *watcher) listen(n *node, msgs <-chan any) {
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

// mayEndHold reports whether a keyspace event may have ended a hold of
// the key: any event but those of the writes that the Driver's scripts
// make to a hash they keep (hset, hdel, expire for PEXPIRE) and those that
// change no owner (new, persist).
func mayEndHold(event string) bool {
	switch event {
	case "hset", "hdel", "expire", "new", "persist":
		return false
	}
	return true
}

// suspectKey has the worker check key's hold, if the Driver has one.
func (w *watcher) suspectKey(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.keys[key]; e != nil && e.l != nil {
		w.suspect[key] = struct{}{}
		w.poke()
	}
}

// check asks Redis for the owner of every suspect key the Driver holds, in
// one pipeline, and fires the Lost of the holds whose owner Redis no longer
// has. It reports false when some could not be checked: they stay
// suspect.
func (w *watcher) check() bool {
	type query struct {
		key, owner string
		cmd        *redis.StringCmd
	}
	w.mu.Lock()
	qs := make([]query, 0, len(w.suspect))
	for key := range w.suspect {
		if e := w.keys[key]; e != nil && e.l != nil {
			qs = append(qs, query{key: key, owner: e.l.redisOwner()})
		}
	}
	clear(w.suspect)
	w.mu.Unlock()
	if len(qs) == 0 {
		return true
	}
	ctx, cancel := w.ctx()
	defer cancel()
	_, _ = w.d.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range qs {
			qs[i].cmd = p.HGet(ctx, qs[i].key, "owner")
		}
		return nil
	})
	ok := true
	var lost []*lease
	w.mu.Lock()
	for _, q := range qs {
		owner, err := q.cmd.Result()
		switch {
		case err == nil, errors.Is(err, redis.Nil):
		case redis.HasErrorPrefix(err, "WRONGTYPE"):
			// Not a hash: written over by hand.
			owner = ""
		default:
			ok = false
			if e := w.keys[q.key]; e != nil && e.l != nil {
				w.suspect[q.key] = struct{}{}
			}
			continue
		}
		if owner == q.owner {
			continue
		}
		// The hold the query was for, or a hold passed on from it (the
		// same owner in Redis): a newer hold of the name has another.
		if e := w.keys[q.key]; e != nil && e.l != nil && e.l.redisOwner() == q.owner {
			e.l.lost.Fire() // its functions run on goroutines of their own
			lost = append(lost, e.l)
			e.l, e.idleAt = nil, time.Now()
		}
	}
	w.mu.Unlock()
	for _, l := range lost {
		w.d.goneInRedis(l)
	}
	return ok
}

// sweep unsubscribes the keys nobody held for keepWatching, and on a
// Cluster moves the keys whose slot has another master now (a failover, a
// resharding) to that master's connection, whose confirmation checks them,
// opens one to each new master and closes those to servers that are no
// longer masters once they have no keys.
func (w *watcher) sweep() {
	now := time.Now()
	slotMasters := map[uint16]string{}
	ctx, cancel := w.ctx()
	defer cancel()
	master := func(slot uint16, key string) string {
		if a, ok := slotMasters[slot]; ok {
			return a
		}
		a := ""
		if c, err := w.cluster.MasterForKey(ctx, key); err == nil {
			a = c.Options().Addr
		}
		slotMasters[slot] = a
		return a
	}
	w.mu.Lock()
	keys := slices.Collect(maps.Keys(w.keys))
	w.mu.Unlock()
	if w.cluster != nil && len(keys) > 0 {
		// go-redis learns of a failover or a moved slot when a command
		// gets a redirection or an error; the watched connections get
		// none. Ask for the slots again (in the background, at most every
		// 200ms): the next sweep follows.
		w.cluster.ReloadState(ctx)
	}
	drop := map[*node][]string{}
	for _, key := range keys {
		w.mu.Lock()
		e := w.keys[key]
		switch {
		case e == nil:
		case e.l == nil && now.Sub(e.idleAt) >= keepWatching:
			delete(w.keys, key)
			if e.n != nil {
				e.n.keys--
				drop[e.n] = append(drop[e.n], w.prefix+key)
			}
		case w.cluster != nil && e.n != nil:
			slot, n := e.slot, e.n
			w.mu.Unlock()
			a := master(slot, key)
			w.mu.Lock()
			if e = w.keys[key]; e == nil || e.n != n || a == "" || a == n.addr {
				break
			}
			e.n.keys--
			drop[e.n] = append(drop[e.n], w.prefix+key)
			e.n = nil
			if !e.fresh {
				e.fresh = true
				w.fresh = append(w.fresh, key)
			}
		}
		w.mu.Unlock()
	}
	for n, chans := range drop {
		_ = n.ps.Unsubscribe(ctx, chans...)
	}
	if w.cluster == nil {
		return
	}
	// A connection to each master, kept; one to a server that is no
	// longer a master goes once no key is watched there.
	masters := w.openMasters()
	if masters == nil {
		return
	}
	w.mu.Lock()
	var idle []*node
	for addr, n := range w.nodes {
		if n.keys == 0 && !masters[addr] {
			delete(w.nodes, addr)
			idle = append(idle, n)
		}
	}
	w.mu.Unlock()
	for _, n := range idle {
		n.close()
	}
}

// goneInRedis stops l's chain, if any, from passing a hold that Redis no
// longer has.
func (d *Driver) goneInRedis(l *lease) {
	if l.c == nil {
		return
	}
	d.mu.Lock()
	l.c.forcedOff()
	d.mu.Unlock()
}
