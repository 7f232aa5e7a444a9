package etcdlock

import (
	"context"
	"fmt"
	"sync"
)

// keyUses is what a session knows of the use of its keys, so that a
// Release can delete its key with a plain Delete — the stock recipe's one
// request, cheaper than a transaction that compares the create revision —
// where that cannot delete a later hold's key.
//
// A session's key of a name is reused by its successive holds (see Keys in
// etcdlock.go). A plain Delete of it is safe when nothing of the session
// can create the key again before the Delete is applied. So a Release
// deletes without a compare only when:
//
//   - its hold is the last one granted the key, and no acquisition of the
//     key has begun since (begin forgets the holder: a hold that was
//     force-released while a new acquisition made the key again compares);
//   - no acquisition of the key is in flight, and none begins until the
//     Delete has its answer (begin waits for it), so that a Put sent later
//     cannot be applied before it.
//
// A Delete that fails may still be applied at any time: the name then
// moves to a new key of the session (gen), which that Delete cannot reach.
// Keys used after such a failure are few, so etcd's index does not grow.
type keyUses struct {
	mu   sync.Mutex
	uses map[string]*keyUse // by the name's first key; entries live while used
}

type keyUse struct {
	gen      int           // the name's key is base~gen after gen failed Deletes
	holder   *lease        // may delete the key without a compare
	inFlight int           // acquisitions of the key between begin and done
	deleting chan struct{} // closed when a plain Delete of the key has its answer
}

// key returns the name's current key, whose first key is base.
func (u *keyUse) key(base string) string {
	if u == nil || u.gen == 0 {
		return base
	}
	return fmt.Sprintf("%s~%d", base, u.gen)
}

// begin starts an acquisition of the name whose first key is base, once
// no plain Delete of its key is in flight, and returns the key to create.
func (k *keyUses) begin(ctx context.Context, base string) (string, error) {
	k.mu.Lock()
	for {
		u := k.uses[base]
		if u == nil {
			u = &keyUse{}
			if k.uses == nil {
				k.uses = make(map[string]*keyUse)
			}
			k.uses[base] = u
		}
		if u.deleting == nil {
			u.holder = nil
			u.inFlight++
			k.mu.Unlock()
			return u.key(base), nil
		}
		deleting := u.deleting
		k.mu.Unlock()
		select {
		case <-deleting:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		k.mu.Lock()
	}
}

// done ends an acquisition that begin started; l is its hold, if granted.
func (k *keyUses) done(base string, l *lease) {
	k.mu.Lock()
	defer k.mu.Unlock()
	u := k.uses[base]
	u.inFlight--
	if l != nil && u.inFlight == 0 {
		u.holder = l
	}
	k.forget(base, u)
}

// plain reports whether l may delete its key without a compare; if so,
// acquisitions of the key wait until deleted is called.
func (k *keyUses) plain(base string, l *lease) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	u := k.uses[base]
	if u == nil || u.holder != l || u.inFlight > 0 {
		return false
	}
	u.holder, u.deleting = nil, make(chan struct{})
	return true
}

// deleted ends the plain Delete that plain allowed; failed says it failed,
// and may still be applied.
func (k *keyUses) deleted(base string, failed bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	u := k.uses[base]
	close(u.deleting)
	u.deleting = nil
	if failed {
		u.gen++
	}
	k.forget(base, u)
}

// forget drops the entry of base when it says nothing more than a missing
// one. k.mu is held.
func (k *keyUses) forget(base string, u *keyUse) {
	if u.gen == 0 && u.holder == nil && u.inFlight == 0 && u.deleting == nil {
		delete(k.uses, base)
	}
}
