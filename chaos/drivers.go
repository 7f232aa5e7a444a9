package main

// The drivers the workers open by URL.
import (
	_ "github.com/golocker/locker/etcdlock"
	_ "github.com/golocker/locker/mongolock"
	_ "github.com/golocker/locker/mysqllock"
	_ "github.com/golocker/locker/redislock"
	_ "github.com/golocker/locker/zklock"
)
