package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// ScriptCommands are the commands each library's Lua scripts run, and
// that the library never sends itself. Redis counts a command run by a
// script in INFO commandstats as a call of that command, besides the call
// of EVALSHA (checked with Redis 7.0: EVAL of a script that runs SET and
// GET adds one call each to eval, set and get). TestScriptCommands checks
// these sets with MONITOR, which tells the two apart.
var ScriptCommands = map[string][]string{
	// redislock/scripts/*.lua
	Golocker: {"hmget", "exists", "pttl", "incr", "hset", "pexpire", "hget", "del", "publish",
		"time", "lindex", "lpop", "hdel", "hexists", "rpush", "lrem", "lrange", "incrby"},
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

// Do sends one command over a new connection and returns the reply: a
// string, an int64, nil or a []any; an error reply is an error. It speaks
// just enough RESP2 for the benchmark's own commands (INFO, FLUSHALL).
func Do(ctx context.Context, addr string, args ...string) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, doTimeout)
	defer cancel()
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := conn.Write(encodeCommand(args)); err != nil {
		return nil, err
	}
	return readReply(bufio.NewReader(conn), 0)
}

func encodeCommand(args []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return []byte(b.String())
}

func readReply(r *bufio.Reader, depth int) (any, error) {
	if depth > 4 {
		return nil, errors.New("reply nested too deeply")
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, errors.New("redis: " + body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 || n > 1<<16 {
			return nil, fmt.Errorf("bad array length %q", body)
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(r, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected reply %q", line)
}
