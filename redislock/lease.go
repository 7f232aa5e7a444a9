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
	c     *chain // the chain the hold belongs to (pass.go); nil for a release by owner only
	name  string
	key   string
	owner string
	ttl   time.Duration
	token uint64
	start time.Time
}

func (d *Driver) newLease(r backend.Request, key string) *lease {
	return &lease{d: d, name: r.Name, key: key, owner: r.Owner, ttl: r.TTL, start: time.Now()}
}

func (l *lease) Token() uint64 { return l.token }

// Start is when the acquire request that was granted was sent, or, for a
// hold passed on by another hold of the Driver, when the chain's lease in
// Redis was last set.
func (l *lease) Start() time.Time { return l.start }

// Lost returns nil: a deleted or expired key is found by the next renewal.
func (l *lease) Lost() <-chan struct{} { return nil }

// redisOwner is the owner that Redis has for the hold: the chain's.
func (l *lease) redisOwner() string {
	if l.c != nil {
		return l.c.owner
	}
	return l.owner
}

// Renew implements backend.Lease with the owner-checked renew script.
func (l *lease) Renew(ctx context.Context, ttl time.Duration) error {
	sent := time.Now()
	n, err := renewScript.Run(ctx, l.d.client, []string{l.key}, l.redisOwner(), ms(ttl)).Int64()
	if err != nil {
		return storeErr(err)
	}
	if l.c != nil && (n == 0 || n == 1) {
		l.d.renewed(l.c, sent, n == 1)
	}
	return ownerReply(n)
}

// Release implements backend.Lease: the lock goes to the Driver's next
// waiter for the name without being freed when it may (pass.go), or else
// through the owner-checked release script, which hands it to the oldest
// waiter in Redis, if any.
func (l *lease) Release(ctx context.Context) error {
	if l.c != nil {
		return l.d.releaseChain(ctx, l)
	}
	n, err := l.release(ctx, false)
	if err != nil {
		return err
	}
	return ownerReply(n)
}

// release runs the release script for the owner; with leave, the owner
// also leaves the queue if it does not hold the lock.
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
