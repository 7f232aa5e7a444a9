module github.com/golocker/locker/redislock

go 1.26.0

require (
	github.com/golocker/locker v0.0.0-00010101000000-000000000000
	github.com/golocker/locker/internal/testserver/redisserver v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

// The other modules of this repository, from this checkout: go.work does
// the same for the workspace, these make GOWORK=off builds work too.
replace (
	github.com/golocker/locker => ..
	github.com/golocker/locker/internal/testserver/redisserver => ../internal/testserver/redisserver
)
