package keyspace

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/keyslot"
)

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

// Hold is a hold whose key a Watcher watches: a lease of the Driver.
type Hold interface {
	// RedisOwner is the owner that Redis has for the hold: a hold that a
	// chain was passed to has its chain's.
	RedisOwner() string
	// Lost is the signal that the Watcher fires.
	Lost() *backend.LostSignal
}

// Watcher watches the keys of a Driver's holds. It is safe for concurrent
// use.
type Watcher struct {
	client  redis.UniversalClient
	gone    func(Hold)           // told of each hold it fired
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
	l      Hold      // the Driver's hold of the key now (a chain's current one); nil: none
	n      *node     // where its channel is subscribed; nil: not yet
	slot   uint16    // its Cluster slot
	fresh  bool      // in watcher.fresh
	idleAt time.Time // when its last hold ended
}

// young is a hold not yet watchAfter old whose key is not subscribed.
type young struct {
	key string
	l   Hold
	due time.Time
}

// node is a pub/sub connection to one server.
type node struct {
	addr string
	ps   *redis.PubSub
	keys int // watched keys subscribed here
	done chan struct{}
}

// New returns a Watcher of the keys on client (a *redis.Client or a
// *redis.ClusterClient) that calls gone with each hold whose Lost it
// fired, off the caller's path.
func New(client redis.UniversalClient, gone func(Hold)) *Watcher {
	db := 0
	cc, _ := client.(*redis.ClusterClient)
	if c, ok := client.(*redis.Client); ok {
		db = c.Options().DB
	}
	base, cancel := context.WithCancel(context.Background())
	return &Watcher{
		client:  client,
		gone:    gone,
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

// Watch starts watching key for l, a hold of it that Redis just granted.
func (w *Watcher) Watch(key string, l Hold) {
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
			w.nodeForLocked("", func() *redis.PubSub { return w.client.Subscribe(context.Background()) })
		}
		w.wg.Add(1)
		go w.run()
	}
	e := w.keys[key]
	if e == nil {
		e = &watched{slot: keyslot.Of(key)}
		w.keys[key] = e
	}
	if e.l != nil {
		// Redis granted the key to l while it had the Driver's earlier
		// hold, which is neither released nor found lost yet (two Clients
		// on one Driver): that hold is gone.
		e.l.Lost().Fire()
	}
	e.l = l
	if e.n == nil && !e.fresh {
		// Every hold waits as long: the queue stays in due order.
		w.young = append(w.young, young{key: key, l: l, due: time.Now().Add(watchAfter)})
		if len(w.young) == 1 {
			w.poke()
		}
	}
}

// ripen subscribes the keys whose holds, still held, have lasted
// watchAfter, and returns when the next hold is due (zero: none).
func (w *Watcher) ripen(now time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := 0
	for ; i < len(w.young) && !w.young[i].due.After(now); i++ {
		y := w.young[i]
		// The same hold in Redis: y's, or one its chain passed it to.
		if e := w.keys[y.key]; e != nil && e.l != nil && e.l.RedisOwner() == y.l.RedisOwner() && e.n == nil && !e.fresh {
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

// Pass makes next, to which the chain of from passed the hold of key, the
// hold that a loss of key fires.
func (w *Watcher) Pass(key string, from, next Hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.keys[key]; e != nil && e.l == from {
		e.l = next
	}
	if from.Lost().Fired() {
		// Redis lost the chain's hold before the pass (check fires under
		// w.mu): so has next.
		next.Lost().Fire()
	}
}

// Unwatch stops l's hold of key from being reported lost: it is being
// released.
func (w *Watcher) Unwatch(key string, l Hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.keys[key]; e != nil && e.l == l {
		e.l, e.idleAt = nil, time.Now()
		if e.n == nil && !e.fresh {
			// Never subscribed: nothing to keep.
			delete(w.keys, key)
		}
	}
}

// poke wakes the worker. w.mu is held.
func (w *Watcher) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Close ends the worker and the connections.
func (w *Watcher) Close() {
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
