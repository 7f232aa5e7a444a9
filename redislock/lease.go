package redislock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/golocker/locker/backend"
)

// lease is one hold on a Driver's Redis.
type lease struct {
	d     *Driver
	name  string
	key   string
	owner string
	ttl   time.Duration
	token uint64
	start time.Time

	// moved is nil, or closed once the transfer that makes this owner the
	// holder in Redis has returned: the lease was passed to it by another
	// hold of the Driver (pass.go). Its renewals and its release wait for
	// it, so that they reach Redis after it.
	moved chan struct{}

	mu    sync.Mutex
	next  uint64    // the token of the next hold this one may pass the lock to
	last  uint64    // the last token reserved for the Driver's passes
	setAt time.Time // when the call that last set the lease in Redis was sent
}

func (d *Driver) newLease(r backend.Request, key string) *lease {
	now := time.Now()
	return &lease{d: d, name: r.Name, key: key, owner: r.Owner, ttl: r.TTL, start: now, setAt: now}
}

// granted records the token of a grant and the last one reserved with it
// (0 or below the token: none).
func (l *lease) granted(token, last uint64, sent time.Time) {
	l.token, l.start = token, sent
	l.mu.Lock()
	l.next, l.last, l.setAt = token+1, max(last, token), sent
	l.mu.Unlock()
}

func (l *lease) Token() uint64 { return l.token }

// Start is when the acquire request that was granted was sent, or, for a
// lease passed on by another hold of the Driver, when the lease in Redis
// was last set.
func (l *lease) Start() time.Time { return l.start }

// Lost returns nil: a deleted or expired key is found by the next renewal.
func (l *lease) Lost() <-chan struct{} { return nil }

// awaitMoved waits for the transfer of a passed lease to return.
func (l *lease) awaitMoved(ctx context.Context) error {
	if l.moved == nil {
		return nil
	}
	select {
	case <-l.moved:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Renew implements backend.Lease with the owner-checked renew script.
func (l *lease) Renew(ctx context.Context, ttl time.Duration) error {
	if err := l.awaitMoved(ctx); err != nil {
		return err
	}
	sent := time.Now()
	n, err := renewScript.Run(ctx, l.d.client, []string{l.key}, l.owner, ms(ttl)).Int64()
	if err != nil {
		return storeErr(err)
	}
	if n == 1 {
		l.mu.Lock()
		l.setAt = sent
		l.mu.Unlock()
	}
	return ownerReply(n)
}

// Release implements backend.Lease: the lock goes to the Driver's next
// waiter for the name without being freed when it may (pass.go), or else
// through the owner-checked release script, which hands it to the oldest
// waiter in Redis, if any.
func (l *lease) Release(ctx context.Context) error {
	if err := l.awaitMoved(ctx); err != nil {
		return err
	}
	if to := l.d.pass(l); to != nil {
		return l.d.transfer(ctx, l, to)
	}
	n, err := l.release(ctx, false)
	if err != nil {
		return err
	}
	return ownerReply(n)
}

// release runs the release script; with leave, the owner also leaves the
// queue if it does not hold the lock.
func (l *lease) release(ctx context.Context, leave bool) (int64, error) {
	mode := "0"
	if leave {
		mode = "1"
	}
	n, err := queueReleaseScript.Run(ctx, l.d.client, scriptKeys(l.key), l.owner, mode).Int64()
	return n, storeErr(err)
}

// ownerReply maps the 1/0 of the owner-checked scripts to nil/ErrLost.
func ownerReply(n int64) error {
	switch n {
	case 1:
		return nil
	case 0:
		return backend.ErrLost
	}
	return fmt.Errorf("%w: %d", errReply, n)
}
