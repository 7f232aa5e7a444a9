package zklock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/golocker/locker"
	"github.com/golocker/locker/zklock"
)

// Open a Client by URL and run a critical section under a lock. Do's ctx
// ends if the session is lost; the fencing token goes with every write, so
// that the storage can refuse a stale owner's. (Not run: it needs an
// ensemble.)
func Example() {
	ctx := context.Background()
	c, err := locker.Open(ctx, "zk://10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181/locks?session_timeout=10s")
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

// Build a Driver on a connection the program already has. It needs the
// connection's session timeout; Close leaves the connection open. (Not
// run: it needs an ensemble.)
func ExampleNew() {
	conn, _, err := zk.Connect([]string{"10.0.0.1:2181"}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	d, err := zklock.New(conn, zklock.WithSessionTimeout(10*time.Second), zklock.WithPrefix("/locks"))
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
