package mongolock

import (
	"context"
	"time"

	"github.com/golocker/locker/backend"
)

// Storage modes, chosen on first use by what the server can do.
const (
	// ModeUpdate keeps one document per name, {_id: name, owner,
	// expires_at, fence}, changed by atomic single-document updates on
	// the server's clock ($$NOW in update pipelines and $expr): MongoDB
	// 4.2 and later.
	ModeUpdate = "update"
	// ModeHistory never updates a document that another owner may write:
	// every change of a lock's owner inserts the next document of its
	// history, {_id: "f/<fence>/<name>"}, and the unique _id lets one
	// writer win. It serves servers without update pipelines, among them
	// FerretDB 1.x, whose findAndModify is not atomic (it reads, then
	// writes by _id). Times are the local clock corrected by the offset
	// to the server's clock measured with hello. The history grows by
	// two small documents per acquisition.
	ModeHistory = "history"
)

// store is one storage mode's operations.
type store interface {
	// acquire makes one attempt: a lease, or a *backend.HeldError that
	// names the holder.
	acquire(ctx context.Context, r backend.Request) (*lease, error)
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

// heldBy is the answer of an attempt that found the lock held by owner
// with fence, its lease ending at expires on the server's clock, now
// (estimated) being the server's time. A lease that the server still
// counts as running but the estimate sees ended has a moment left: the
// estimate is off by up to half a round trip.
func heldBy(owner string, fence int64, expires, now time.Time) *backend.HeldError {
	return &backend.HeldError{Owner: owner, Token: uint64(fence), Left: max(expires.Sub(now), time.Millisecond)}
}
