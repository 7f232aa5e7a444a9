package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/golocker/locker/backend"
)

// Passing. When a hold of a Driver ends and the next waiter in the lock's
// queue is a waiter of the same Driver, the lock goes to it without being
// freed: the releasing goroutine gives it a lease at once, and then runs
// transfer.lua, which makes Redis agree (the waiter becomes the owner, its
// lease starts again, it leaves the queue). The hand-off then costs no
// round trip: the next holder starts while the transfer is on its way.
//
// What keeps it as safe and as fair as a release:
//
//   - Tokens. The grant that a hand-off makes to a waiter with an inbox
//     reserves BLOCK tokens (scripts/queue.lua), and each transfer reserves
//     more when few are left. A passed hold takes the next reserved token:
//     above its predecessor's, below any token granted after the lock
//     leaves the Driver, since nothing else takes tokens while it is held.
//   - Order. A waiter is passed the lock only if its last call to Redis
//     found only this Driver's waiters ahead of it in the queue (mine), and
//     only the Driver's oldest waiter for the name is: a waiter of another
//     process that arrived earlier is never overtaken, and one that arrived
//     later is behind it in Redis too.
//   - The lease. The passed hold's Start is when its predecessor's lease
//     was last set in Redis, so package locker never counts on more than
//     Redis gives. The lock is passed only while that is recent (less than
//     a tenth of the TTL ago) and only between holds with the same TTL; a
//     hold that came by a pass passes on only after its transfer returned.
//   - Failure. If the predecessor no longer held the lock (forced off,
//     expired), the transfer changes nothing: the predecessor's Release
//     reports ErrLost, and the passed hold finds itself lost at its next
//     renewal or its release, no later than its predecessor would have.
//     Its token is below that of whoever holds the lock, so a fenced
//     resource refuses it.
//
// With WithWaitReplicas, nothing is passed: each grant is confirmed on
// the replicas.

// passBlock is how many tokens a transfer reserves when fewer are left.
// scripts/queue.lua's BLOCK is the same for a hand-off.
const passBlock = 16

// passFresh: the lock is passed only while its lease in Redis was set less
// than TTL/passFresh ago.
const passFresh = 10

// pass gives the lock that l holds to the Driver's oldest waiter for the
// same name, when it may (see above), and returns the lease it gave; nil
// when it did not.
func (d *Driver) pass(l *lease) *lease {
	if d.opts.waitReplicas > 0 {
		return nil
	}
	l.mu.Lock()
	next, last, setAt := l.next, l.last, l.setAt
	l.mu.Unlock()
	if next == 0 || next > last || time.Since(setAt) >= l.ttl/passFresh {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.isClosed() {
		return nil
	}
	q := d.queues[l.name]
	if len(q) == 0 || !q[0].mine || q[0].ttl != l.ttl {
		return nil
	}
	w := q[0]
	d.unregisterLocked(w)
	to := &lease{
		d: d, name: l.name, key: l.key, owner: w.owner, ttl: l.ttl,
		token: next, start: setAt, moved: make(chan struct{}),
		setAt: setAt, last: last, // no next: it may pass on once moved
	}
	d.moving[to] = struct{}{}
	w.pass <- to // capacity 1, and w is passed the lock only once
	return to
}

// transfer runs transfer.lua for a lock that from passed to to, and then
// lets to renew, release or pass on. It returns from's release: nil, or
// ErrLost when from no longer held the lock, in which case Redis did not
// change and to's hold is not in Redis either.
func (d *Driver) transfer(ctx context.Context, from, to *lease) error {
	sent := time.Now()
	res, err := transferScript.Run(ctx, d.client, scriptKeys(from.key),
		from.owner, to.owner, to.token, ms(to.ttl), passBlock).Int64Slice()
	moved := err == nil && len(res) == 3 && res[0] == 1
	if moved {
		to.mu.Lock()
		to.next, to.last, to.setAt = uint64(res[1]), uint64(res[2]), sent
		to.mu.Unlock()
	}
	d.mu.Lock()
	delete(d.moving, to)
	d.mu.Unlock()
	close(to.moved)
	switch {
	case err != nil:
		return storeErr(err)
	case len(res) != 3:
		return fmt.Errorf("%w from the transfer script: %v", errReply, res)
	case !moved:
		return backend.ErrLost
	}
	return nil
}

// movingOwners returns the owners of name's passed leases whose transfer
// has not returned: Waiters does not count them.
func (d *Driver) movingOwners(name string) []any {
	d.mu.Lock()
	defer d.mu.Unlock()
	var owners []any
	for l := range d.moving {
		if l.name == name {
			owners = append(owners, l.owner)
		}
	}
	return owners
}
