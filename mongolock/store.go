package mongolock

import (
	"context"
	"time"

	"github.com/golocker/locker/backend"
)

// Storage modes, chosen on first use by what the server can do.
const (
	// ModeUpdate keeps one document per name, {_id: name, owner,
	// expires_at, fence, tickets, serving, serving_at}, changed by atomic
	// single-document updates on the server's clock ($$NOW in update
	// pipelines and $expr): MongoDB 4.2 and later.
	ModeUpdate = "update"
	// ModeHistory never updates a document that another owner may write:
	// every change of a lock's owner inserts the next document of its
	// history, {_id: "f/<fence>/<name>"}, and every ticket of its queue
	// is a document {_id: "t/<ticket>/<name>"}; the unique _id lets one
	// writer win. It serves servers without update pipelines, among them
	// FerretDB 1.x, whose findAndModify is not atomic (it reads, then
	// writes by _id). Times are the local clock corrected by the offset
	// to the server's clock measured with hello. The history grows by
	// two small documents per acquisition, and one per wait.
	ModeHistory = "history"
)

// attempt is one acquisition attempt: ticket is the waiter's ticket (0:
// none), wait tells a waiting acquisition from a single attempt.
type attempt struct {
	backend.Request
	ticket int64
	wait   bool
}

// store is one storage mode's operations.
type store interface {
	// acquire makes one attempt: a lease, or nil and the lock's state.
	acquire(ctx context.Context, a attempt) (*lease, state, error)
	// takeTicket gives the waiter the next ticket of name's queue.
	takeTicket(ctx context.Context, name string) (int64, state, error)
	// look reads name's state; exists is false when there is none.
	look(ctx context.Context, name string) (state, error)
	renew(ctx context.Context, l *lease, ttl time.Duration) error
	// renewBatch renews leases (all of this store) to ttl and sets errs.
	renewBatch(ctx context.Context, leases []*lease, ttl time.Duration, errs []error)
	release(ctx context.Context, l *lease) error
	// releaseAny releases by owner whatever the lease.
	releaseAny(ctx context.Context, name, owner string) error
	holds(ctx context.Context, prefix string) ([]backend.Hold, error)
	forceRelease(ctx context.Context, name string) error
}

// leaseMs is a lease in whole milliseconds (BSON dates' resolution),
// rounded up.
func leaseMs(ttl time.Duration) int64 {
	return int64(max((ttl+time.Millisecond-1)/time.Millisecond, 1))
}
