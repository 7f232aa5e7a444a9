package main

// The drivers lockctl can open by URL.
import (
	_ "github.com/golocker/locker/etcdlock"
	_ "github.com/golocker/locker/locallock"
	_ "github.com/golocker/locker/mongolock"
	_ "github.com/golocker/locker/mysqllock"
	"github.com/golocker/locker/redislock"
	_ "github.com/golocker/locker/zklock"
)

// go-redis prints on stderr unless a program says otherwise, and a driver
// does not change that for it (docs/decisions.md, D16): go-redis's
// messages go to the Clients' loggers.
func init() { redislock.CaptureGoRedisLog() }
