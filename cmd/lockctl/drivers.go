package main

// The drivers lockctl can open by URL.
import (
	_ "github.com/golocker/locker/etcdlock"
	_ "github.com/golocker/locker/locallock"
	_ "github.com/golocker/locker/mongolock"
	_ "github.com/golocker/locker/mysqllock"
	_ "github.com/golocker/locker/redislock"
	_ "github.com/golocker/locker/zklock"
)
