package keyspace

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/internal/driverkit"
	"github.com/golocker/locker/redislock/internal/config"
	"github.com/golocker/locker/redislock/internal/holds"
)

// Published decides whether a Driver opened from a URL watches its keys:
// as opt (the option or URL parameter) says, else when every master of
// client publishes the keyspace events a Watcher needs. Asked for them, it
// fails if a master says it lacks them; a master that does not answer
// CONFIG GET (a managed service, a user without the right) counts as
// lacking them unless opt says otherwise.
func Published(ctx context.Context, client redis.UniversalClient, opt *bool) (bool, error) {
	if opt != nil && !*opt {
		return false, nil
	}
	var mu sync.Mutex
	var lacking []string
	unknown := false
	err := driverkit.WithinErr(ctx, func() error {
		return holds.ForEachMaster(ctx, client, func(ctx context.Context, c redis.Cmdable) error {
			v, err := c.ConfigGet(ctx, "notify-keyspace-events").Result()
			mu.Lock()
			defer mu.Unlock()
			var re redis.Error
			switch {
			case errors.As(err, &re):
				unknown = true
			case err != nil:
				return err
			case !publishes(v["notify-keyspace-events"]):
				lacking = append(lacking, fmt.Sprintf("%s has %q", config.AddrOf(c), v["notify-keyspace-events"]))
			}
			return nil
		})
	})
	switch {
	case err != nil && opt == nil:
		// Not known: the Driver does not watch.
		return false, nil
	case err != nil:
		return false, fmt.Errorf("redislock: keyspace_events: CONFIG GET notify-keyspace-events: %w", err)
	case len(lacking) > 0 && opt != nil:
		return false, config.BadOption("keyspace_events=true, but notify-keyspace-events lacks K, g or x (e.g. Kgx): %s", strings.Join(lacking, "; "))
	case len(lacking) > 0, unknown && opt == nil:
		return false, nil
	}
	return true, nil
}

// publishes reports whether a notify-keyspace-events value publishes what
// a Watcher watches: keyspace events (K) of generic commands (g: DEL,
// UNLINK, RENAME…) and of expiries (x); A stands for every class.
func publishes(flags string) bool {
	has := func(c string) bool { return strings.Contains(flags, c) }
	return has("K") && (has("A") || has("g") && has("x"))
}
