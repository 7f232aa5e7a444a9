package redislock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts live in scripts/*.lua so they can be read and reviewed
// as Lua. Script.Run sends EVALSHA and falls back to EVAL (which caches the
// script on that server) when the server does not know the script yet.
//
// A Driver's scripts keep a queue of waiters beside each lock and share
// its functions (scripts/queue.lua), which are put in front of each of
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

	queueAcquireScript = redis.NewScript(queueLua + queueAcquireLua)
	queueReleaseScript = redis.NewScript(queueLua + queueReleaseLua)
	forceReleaseScript = redis.NewScript(queueLua + forceReleaseLua)
	reserveScript      = redis.NewScript(queueLua + reserveLua)
	waitersScript      = redis.NewScript(queueLua + waitersLua)
	acquireScript      = redis.NewScript(acquireLua)
	releaseScript      = redis.NewScript(releaseLua)
	renewScript        = redis.NewScript(renewLua)
	renewManyScript    = redis.NewScript(renewManyLua)
)
