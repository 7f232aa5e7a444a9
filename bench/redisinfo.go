package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/golocker/locker/internal/testserver/redisserver"
)

// ScriptCommands are the commands each library's Lua scripts run, and
// that the library never sends itself. Redis counts a command run by a
// script in INFO commandstats as a call of that command, besides the call
// of EVALSHA (checked with Redis 7.0: EVAL of a script that runs SET and
// GET adds one call each to eval, set and get). TestScriptCommands checks
// these sets with MONITOR, which tells the two apart.
var ScriptCommands = map[string][]string{
	// redislock/internal/scripts/*.lua
	Golocker: {"hmget", "exists", "pttl", "incr", "hset", "pexpire", "hget", "del", "publish",
		"time", "lindex", "lpop", "hdel", "hexists", "rpush", "lrem", "lrange", "incrby", "get"},
	// redsync's deleteScript and touchScript; it sends SET NX PX itself.
	Redsync: {"get", "del", "pexpire"},
	// bsm/redislock's luaObtain, luaRelease, luaRefresh, luaPTTL.
	BSM: {"set", "getrange", "get", "del", "pexpire", "pttl"},
}

// CommandStats is the calls of each command, from INFO commandstats.
type CommandStats map[string]int64

// Delta returns after − before for every command.
func (after CommandStats) Delta(before CommandStats) CommandStats {
	d := CommandStats{}
	for k, v := range after {
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

// Counts splits the calls of a window of one library's run into those the
// clients sent (calls) and all that Redis counted (all, the script's
// commands included). INFO, which the benchmark sends to take the counts,
// is left out of both.
func (d CommandStats) Counts(library string) (calls, all int64) {
	inScript := map[string]bool{}
	for _, c := range ScriptCommands[library] {
		inScript[c] = true
	}
	for k, v := range d {
		if k == "info" {
			continue
		}
		all += v
		if !inScript[k] {
			calls += v
		}
	}
	return calls, all
}

// ReadCommandStats returns the server's INFO commandstats, over a new
// connection (so no handshake command of a client library is counted).
func ReadCommandStats(ctx context.Context, addr string) (CommandStats, error) {
	r, err := Do(ctx, addr, "INFO", "commandstats")
	if err != nil {
		return nil, err
	}
	s, ok := r.(string)
	if !ok {
		return nil, fmt.Errorf("INFO commandstats: unexpected reply %T", r)
	}
	st := CommandStats{}
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("INFO commandstats: %q: %v", line, err)
				}
				st[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	return st, nil
}

// doTimeout bounds one Do.
const doTimeout = 10 * time.Second

// Do sends one command to the Redis server at addr over a new connection
// (redisserver.Do), within doTimeout, and returns the reply.
func Do(ctx context.Context, addr string, args ...string) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, doTimeout)
	defer cancel()
	return redisserver.Do(ctx, addr, args...)
}
