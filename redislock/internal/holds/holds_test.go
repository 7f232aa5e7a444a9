package holds

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/redislock/internal/keys"
)

var (
	servers    testserver.Shared
	standalone = testserver.NewLazy(&servers, redisserver.Redis)
)

func TestMain(m *testing.M) { os.Exit(drivertest.Main(m, &servers)) }

// TestScan lists the holds under a prefix, names with the characters the
// keys escape included, with their owner, token and expiry, and nothing
// else: other prefixes, names outside the prefix, fence counters.
func TestScan(t *testing.T) {
	ctx := drivertest.Context(t, time.Minute)
	c := redis.NewClient(&redis.Options{Addr: standalone.Get(t).Addr})
	defer c.Close()
	k := keys.Keys{Prefix: fmt.Sprintf("scan%d*:", time.Now().UnixNano())}
	hold := func(k keys.Keys, name, owner string, token int, ttl time.Duration) {
		t.Helper()
		key := k.Lock(name)
		if err := c.HSet(ctx, key, "owner", owner, "token", token).Err(); err != nil {
			t.Fatal(err)
		}
		if ttl > 0 {
			if err := c.PExpire(ctx, key, ttl).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Incr(ctx, keys.Fence(key)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const prefix = "p/*[x]}%/"
	for i := range 3 {
		hold(k, fmt.Sprint(prefix, i, "}{"), fmt.Sprint("o", i), i+1, time.Minute)
	}
	hold(k, prefix+"no-expiry", "o", 9, 0)
	hold(k, "elsewhere", "o", 1, time.Minute)
	hold(keys.Keys{Prefix: "other:"}, prefix+"0}{", "o", 1, time.Minute)
	var got []backend.Hold
	err := ForEachMaster(ctx, c, func(ctx context.Context, n redis.Cmdable) error {
		hs, err := Scan(ctx, n, k, prefix)
		got = append(got, hs...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b backend.Hold) int { return int(a.Token) - int(b.Token) })
	if len(got) != 4 {
		t.Fatalf("Scan = %+v, want the 4 holds under the prefix", got)
	}
	for i, h := range got[:3] {
		if h.Name != fmt.Sprint(prefix, i, "}{") || h.Owner != fmt.Sprint("o", i) || h.Token != uint64(i+1) {
			t.Errorf("hold %d = %+v", i, h)
		}
		if left := time.Until(h.Expires); left <= 0 || left > time.Minute {
			t.Errorf("hold %d expires in %v, want within the minute", i, left)
		}
	}
	if h := got[3]; h.Name != prefix+"no-expiry" || !h.Expires.IsZero() {
		t.Errorf("the hold without expiry = %+v, want no Expires", h)
	}
}
