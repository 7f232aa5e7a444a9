package etcdlock

import (
	"context"
	"fmt"
	"sync"

	"github.com/golocker/locker/backend"
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
// A Delete that fails may still be applied at any time, and so may the Put
// of an acquisition that failed in flight, until its abort key is written:
// the name then moves to a new key of the session (gen), which neither can
// reach. Keys used after such a failure are few, so etcd's index does not
// grow; the entry of a moved name lives as long as the session.
type keyUses struct {
	mu       sync.Mutex
	uses     map[string]*keyUse // by the name's first key; entries live while used
	heldBack int                // acquisitions waiting in begin (tests)
}

type keyUse struct {
	gen      int           // the name's key is base~gen after gen failed Deletes or Puts
	holder   *lease        // may delete the key without a compare
	inFlight int           // acquisitions of the key between begin and done
	deleting chan struct{} // closed when a plain Delete of the key has its answer
}

// key returns the name's current key, whose first key is base.
func (u *keyUse) key(base string) string {
	if u.gen == 0 {
		return base
	}
	return fmt.Sprintf("%s~%d", base, u.gen)
}

// begin starts an acquisition of the name whose first key is base, once
// no plain Delete of its key is in flight, and returns the key to create.
// It gives up when ctx, the session (errSessionEnded) or the Driver
// (ErrClosed) ends.
func (k *keyUses) begin(ctx context.Context, base string, session, driver <-chan struct{}) (string, error) {
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
		k.heldBack++
		k.mu.Unlock()
		var err error
		select {
		case <-deleting:
		case <-ctx.Done():
			err = ctx.Err()
		case <-session:
			err = errSessionEnded
		case <-driver:
			err = backend.ErrClosed
		}
		k.mu.Lock()
		k.heldBack--
		if err != nil {
			k.mu.Unlock()
			return "", err
		}
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

// move makes the name whose first key is base use a new key, during an
// acquisition that begin started: a write to the current key may still be
// applied.
func (k *keyUses) move(base string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.uses[base].gen++
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
