package redislock

import (
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts live in scripts/*.lua so they can be read and reviewed
// as Lua. Script.Run sends EVALSHA and falls back to EVAL (which caches the
// script on that server) when the server does not know the script yet.
//
// A Driver's scripts keep a queue of waiters beside each lock and share
// its functions (scripts/queue.lua), which withQueue puts into each of
// them. RedLock's instances keep no queue: acquire.lua and release.lua are
// theirs.
var (
	//go:embed scripts/queue.lua
	queueLua string
	//go:embed scripts/queue_acquire.lua
	queueAcquireLua string
	//go:embed scripts/queue_release.lua
	queueReleaseLua string
	//go:embed scripts/forcerelease.lua
	forceReleaseLua string
	//go:embed scripts/reserve.lua
	reserveLua string
	//go:embed scripts/waiters.lua
	waitersLua string
	//go:embed scripts/acquire.lua
	acquireLua string
	//go:embed scripts/release.lua
	releaseLua string
	//go:embed scripts/renew.lua
	renewLua string
	//go:embed scripts/renew_many.lua
	renewManyLua string

	queueAcquireScript = redis.NewScript(withQueue(queueAcquireLua))
	queueReleaseScript = redis.NewScript(withQueue(queueReleaseLua))
	forceReleaseScript = redis.NewScript(withQueue(forceReleaseLua))
	reserveScript      = redis.NewScript(withQueue(reserveLua))
	waitersScript      = redis.NewScript(withQueue(waitersLua))
	acquireScript      = redis.NewScript(acquireLua)
	releaseScript      = redis.NewScript(releaseLua)
	renewScript        = redis.NewScript(renewLua)
	renewManyScript    = redis.NewScript(renewManyLua)
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
