package redislock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/redislock"
	"github.com/golocker/locker/redislock/redlock"
)

func TestNewValidates(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for _, tc := range []struct {
		name      string
		err       error
		badOption bool
	}{
		{"nil client", must(redislock.New(nil)), false},
		{"ring", must(redislock.New(ring)), false},
		{"negative replicas", must(redislock.New(rdb, redislock.WithWaitReplicas(-1, time.Second))), true},
		{"replicas without a timeout", must(redislock.New(rdb, redislock.WithWaitReplicas(1, 0))), true},
		{"prefix with a brace", must(redislock.New(rdb, redislock.WithKeyPrefix("a{"))), true},
		{"instance timeout on a Driver", must(redislock.New(rdb, redlock.WithInstanceTimeout(time.Second))), true},
		{"wait replicas on a Ring-less wrapper", must(redislock.New(wrapped{rdb}, redislock.WithWaitReplicas(1, time.Second))), false},
		{"negative batch", must(redislock.New(rdb, redislock.WithBatch(-1))), true},
		{"batch over the bound", must(redislock.New(rdb, redislock.WithBatch(1001))), true},
		{"batch with wait replicas", must(redislock.New(rdb, redislock.WithBatch(2), redislock.WithWaitReplicas(1, time.Second))), true},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if got := errors.Is(tc.err, locker.ErrInvalidOption); got != tc.badOption {
			t.Errorf("%s: %v; errors.Is(ErrInvalidOption) = %v, want %v", tc.name, tc.err, got, tc.badOption)
		}
	}
}

// wrapped is a UniversalClient that is neither a *redis.Client nor a
// *redis.ClusterClient, as an instrumentation wrapper would be.
type wrapped struct{ redis.UniversalClient }

func must[T any](_ T, err error) error { return err }

// TestNewDoesNotCloseTheUsersClient: a Driver built with New leaves the
// client open when it closes.
func TestNewDoesNotCloseTheUsersClient(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, time.Minute)
	rdb := redis.NewClient(&redis.Options{Addr: standalone.Get(t).Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	d, err := redislock.New(rdb, redislock.WithKeyPrefix("mine:"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := locker.New(d)
	if err != nil {
		t.Fatal(err)
	}
	locked(t, ctx, c, "users-client")
	if n, err := rdb.Exists(ctx, "mine:{users-client}").Result(); err != nil || n != 1 {
		t.Errorf("EXISTS mine:{users-client} = %d, %v; want the key under the prefix", n, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Errorf("the user's client after the driver closed: %v", err)
	}
	if n, _ := rdb.Exists(ctx, "mine:{users-client}").Result(); n != 0 {
		t.Error("Close did not release the hold")
	}
}
