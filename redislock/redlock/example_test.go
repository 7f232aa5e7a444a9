package redlock_test

import (
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker"
	"github.com/golocker/locker/redislock/redlock"
)

// RedLock over three independent instances: a lock needs two of them.
func ExampleNew() {
	var clients []redis.UniversalClient
	for _, addr := range []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"} {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		clients = append(clients, rdb)
	}
	d, err := redlock.New(clients)
	if err != nil {
		log.Fatal(err)
	}
	c, err := locker.New(d)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
}
