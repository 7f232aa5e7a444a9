package mongolock

import (
	"context"
	"time"

	"github.com/golocker/locker/backend"
)

// Storage modes, chosen on first use by what the server can do.
const (
	// ModeUpdate keeps one document per name, {_id: name, owner,
	// expires_at, fence}, changed by atomic single-document updates on the
	// server's clock ($$NOW in update pipelines and $expr): MongoDB 4.2
	// and later.
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
	// acquire makes one attempt: a lease, or ErrHeld with the holder's
	// remaining lease when it read it (else unknown).
	acquire(ctx context.Context, r backend.Request) (*lease, time.Duration, error)
	// remaining returns the holder's remaining lease, <= 0 when free.
	remaining(ctx context.Context, name string) (time.Duration, error)
	renew(ctx context.Context, l *lease, ttl time.Duration) error
	release(ctx context.Context, l *lease) error
	// releaseAny releases by owner whatever the lease.
	releaseAny(ctx context.Context, name, owner string) error
	holds(ctx context.Context, prefix string) ([]backend.Hold, error)
	forceRelease(ctx context.Context, name string) error
}

// unknown is the remaining lease when it was not read.
const unknown = time.Duration(-1)

// leaseMs is a lease in whole milliseconds (BSON dates' resolution),
// rounded up.
func leaseMs(ttl time.Duration) int64 {
	return int64(max((ttl+time.Millisecond-1)/time.Millisecond, 1))
}
