package redislock_test

import (
	"context"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker"
	"github.com/golocker/locker/redislock"
)

// Open a Client by URL: the scheme picks the topology, and moving from one
// Redis to a Cluster changes only the URL.
func Example() {
	ctx := context.Background()
	c, err := locker.Open(ctx, "redis+cluster://10.0.0.1:7000,10.0.0.2:7000?key_prefix=billing:")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m := c.NewMutex("invoices/2024-06", locker.WithTTL(10*time.Second))
	err = locker.Do(ctx, m, func(ctx context.Context) error {
		// Pass m.Token() along with every write the lock guards.
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Build the driver from a go-redis client the application already has.
// Close does not close that client.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "10.0.0.5:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()

	d, err := redislock.New(rdb, redislock.WithWaitReplicas(1, 50*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	c, err := locker.New(d)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	_ = c.NewMutex("nightly-report")
}
