// Package scripts holds redislock's Lua scripts, for the Driver and for
// RedLock, and reads their replies.
//
// The scripts live in *.lua beside this file so they can be read and
// reviewed as Lua. Script.Run sends EVALSHA and falls back to EVAL (which
// caches the script on that server) when the server does not know the
// script yet.
//
// A Driver's scripts keep a queue of waiters beside each lock and share
// its functions (queue.lua), which withQueue puts into each of them; they
// take the keys of keys.Queued. RedLock's instances keep no queue:
// acquire.lua and release.lua are theirs.
package scripts

import (
	_ "embed"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
)

var (
	//go:embed queue.lua
	queueLua string
	//go:embed queue_acquire.lua
	queueAcquireLua string
	//go:embed queue_release.lua
	queueReleaseLua string
	//go:embed forcerelease.lua
	forceReleaseLua string
	//go:embed reserve.lua
	reserveLua string
	//go:embed waiters.lua
	waitersLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed release.lua
	releaseLua string
	//go:embed renew.lua
	renewLua string
	//go:embed renew_many.lua
	renewManyLua string
)

// The scripts. Those of a Driver's queue take keys.Queued as their KEYS.
var (
	QueueAcquire = redis.NewScript(withQueue(queueAcquireLua))
	QueueRelease = redis.NewScript(withQueue(queueReleaseLua))
	ForceRelease = redis.NewScript(withQueue(forceReleaseLua))
	Reserve      = redis.NewScript(withQueue(reserveLua))
	Waiters      = redis.NewScript(withQueue(waitersLua))
	Acquire      = redis.NewScript(acquireLua)
	Release      = redis.NewScript(releaseLua)
	Renew        = redis.NewScript(renewLua)
	RenewMany    = redis.NewScript(renewManyLua)
)

// queueMark is the line of a script where withQueue puts queue.lua.
const queueMark = "-- [queue.lua]\n"

// withQueue returns script with queue.lua's functions at its queueMark
// line, or in front of it when it has none. What comes before the mark
// runs before the functions are defined, which costs a few µs of the
// server's time on every call: a script's path for a lock that nobody
// waits for goes there.
func withQueue(script string) string {
	if before, after, ok := strings.Cut(script, queueMark); ok {
		return before + queueLua + after
	}
	return queueLua + script
}

// ErrReply is a reply of a script that the driver does not understand:
// the key holds something else, or another program wrote it.
var ErrReply = errors.New("redislock: unexpected reply")

// Acquired is an acquire script's reply: {1, token, last} granted by this
// call, {2, token, last, pttl} held already by the caller, {0, pttl, fence,
// owner, token} held by another owner; RedLock's acquire.lua answers {1,
// token} and {0, pttl}.
type Acquired struct {
	Status      int64  // 1 granted, 2 held already by the caller, 0 held by another owner
	Token       int64  // the caller's token (1, 2)
	Last        int64  // the last token reserved for the caller's Driver (1, 2)
	PTTL        int64  // the remaining lease in ms (0: the holder's; 2: the caller's); -1 no expiry, -2 gone
	Fence       int64  // the fence counter (0)
	Owner       string // the holder (0)
	HolderToken int64  // the holder's token (0)
}

// ParseAcquire reads an acquire script's reply.
func ParseAcquire(res any) (Acquired, error) {
	a, _ := res.([]any)
	p := reply{a: a, ok: len(a) >= 2}
	var r Acquired
	if p.ok {
		r.Status = p.int(0)
	}
	switch {
	case !p.ok:
	case r.Status == 0 && len(a) == 5:
		r.PTTL, r.Fence, r.Owner, r.HolderToken = p.int(1), p.int(2), p.str(3), p.int(4)
	case r.Status == 0 && len(a) == 2: // RedLock's acquire.lua
		r.PTTL = p.int(1)
	case r.Status == 1 && (len(a) == 2 || len(a) == 3):
		r.Token = p.int(1)
		if len(a) == 3 {
			r.Last = p.int(2)
		}
	case r.Status == 2 && len(a) == 4:
		r.Token, r.Last, r.PTTL = p.int(1), p.int(2), p.int(3)
	default:
		p.ok = false
	}
	if !p.ok {
		return Acquired{}, fmt.Errorf("%w from the acquire script: %v", ErrReply, res)
	}
	return r, nil
}

// reply reads the elements of an array reply; ok turns false at the first
// one of the wrong type.
type reply struct {
	a  []any
	ok bool
}

func (p *reply) int(i int) int64 {
	v, ok := p.a[i].(int64)
	p.ok = p.ok && ok
	return v
}

func (p *reply) str(i int) string {
	v, ok := p.a[i].(string)
	p.ok = p.ok && ok
	return v
}

// Left turns the holder's PTTL into a wait bound: unknown when the key
// has no expiry (-1) or is gone (-2).
func Left(pttl int64, unknown time.Duration) time.Duration {
	if pttl < 0 {
		return unknown
	}
	return time.Duration(pttl) * time.Millisecond
}

// OwnerReply maps the 1/0 of the owner-checked scripts to nil/ErrLost.
func OwnerReply(n int64) error {
	switch n {
	case 1:
		return nil
	case 0:
		return backend.ErrLost
	}
	return fmt.Errorf("%w: %d", ErrReply, n)
}

// MS is d in whole milliseconds, rounded up: Redis leases are in ms.
func MS(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// MayHaveRun reports whether a failed call may still have run on the
// server: anything but an error reply or a closed client (a timeout, a
// cancelled ctx, a broken connection after the request was written).
func MayHaveRun(err error) bool {
	var re redis.Error
	if errors.As(err, &re) || errors.Is(err, redis.ErrClosed) {
		return false
	}
	// A call that never got a connection was never sent: no clean-up,
	// which would only wait for the same unreachable server.
	var oe *net.OpError
	return !errors.As(err, &oe) || oe.Op != "dial"
}
