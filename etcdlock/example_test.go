package etcdlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/golocker/locker"
	"github.com/golocker/locker/etcdlock"
)

// Open a Client by URL and run a critical section under a lock. Do's ctx
// ends if the session is lost; the fencing token goes with every write, so
// that the storage can refuse a stale owner's. (Not run: it needs a
// cluster.)
func Example() {
	ctx := context.Background()
	c, err := locker.Open(ctx, "etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379/locks?session_ttl=10s")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	m := c.NewMutex("reports/nightly")
	err = locker.Do(ctx, m, func(ctx context.Context) error {
		fmt.Println("writing the report with token", m.Token())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Build a Driver on a client the program already has; Close leaves the
// client open. (Not run: it needs a cluster.)
func ExampleNew() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"10.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	d, err := etcdlock.New(cli, etcdlock.WithPrefix("/locks"), etcdlock.WithSessionTTL(15*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	c, err := locker.New(d)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	_ = c.NewMutex("shards/rebalance")
}
