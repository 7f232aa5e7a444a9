package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/golocker/locker/backend"
)

// lease is one hold on a Driver's Redis.
type lease struct {
	d     *Driver
	key   string
	owner string
	token uint64
	start time.Time
}

func (l *lease) Token() uint64 { return l.token }

// Start is when the acquire request that was granted was sent.
func (l *lease) Start() time.Time { return l.start }

// Lost returns nil: a deleted or expired key is found by the next renewal.
func (l *lease) Lost() <-chan struct{} { return nil }

// Renew implements backend.Lease with the owner-checked renew script.
func (l *lease) Renew(ctx context.Context, ttl time.Duration) error {
	n, err := renewScript.Run(ctx, l.d.client, []string{l.key}, l.owner, ms(ttl)).Int64()
	if err != nil {
		return storeErr(err)
	}
	return ownerReply(n)
}

// Release implements backend.Lease with the owner-checked release script,
// which hands the lock to the oldest waiter, if any.
func (l *lease) Release(ctx context.Context) error {
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
