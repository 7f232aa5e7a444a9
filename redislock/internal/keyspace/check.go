package keyspace

import (
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

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
func (w *Watcher) suspectKey(key string) {
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
func (w *Watcher) check() bool {
	type query struct {
		key, owner string
		cmd        *redis.StringCmd
	}
	w.mu.Lock()
	qs := make([]query, 0, len(w.suspect))
	for key := range w.suspect {
		if e := w.keys[key]; e != nil && e.l != nil {
			qs = append(qs, query{key: key, owner: e.l.RedisOwner()})
		}
	}
	clear(w.suspect)
	w.mu.Unlock()
	if len(qs) == 0 {
		return true
	}
	ctx, cancel := w.ctx()
	defer cancel()
	_, _ = w.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range qs {
			qs[i].cmd = p.HGet(ctx, qs[i].key, "owner")
		}
		return nil
	})
	ok := true
	var lost []Hold
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
		if e := w.keys[q.key]; e != nil && e.l != nil && e.l.RedisOwner() == q.owner {
			e.l.Lost().Fire() // its functions run on goroutines of their own
			lost = append(lost, e.l)
			e.l, e.idleAt = nil, time.Now()
		}
	}
	w.mu.Unlock()
	for _, l := range lost {
		w.gone(l)
	}
	return ok
}
