package keyspace

import (
	"maps"
	"slices"
	"time"
)

// sweep unsubscribes the keys nobody held for keepWatching, and on a
// Cluster moves the keys whose slot has another master now (a failover, a
// resharding) to that master's connection, whose confirmation checks them,
// opens one to each new master and closes those to servers that are no
// longer masters once they have no keys.
func (w *Watcher) sweep() {
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
