package redislock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts live in scripts/*.lua so they can be read and reviewed
// as Lua. Script.Run sends EVALSHA and falls back to EVAL (which caches the
// script on that server) when the server does not know the script yet.
var (
	//go:embed scripts/acquire.lua
	acquireLua string
	//go:embed scripts/release.lua
	releaseLua string
	//go:embed scripts/renew.lua
	renewLua string
	//go:embed scripts/forcerelease.lua
	forceReleaseLua string

	acquireScript      = redis.NewScript(acquireLua)
	releaseScript      = redis.NewScript(releaseLua)
	renewScript        = redis.NewScript(renewLua)
	forceReleaseScript = redis.NewScript(forceReleaseLua)
)
