module github.com/golocker/locker/zklock

go 1.26.0

require (
	github.com/go-zookeeper/zk v1.0.4
	github.com/golocker/locker v0.0.0-00010101000000-000000000000
	github.com/golocker/locker/internal/testserver/zkserver v0.0.0-00010101000000-000000000000
)

require go.uber.org/goleak v1.3.0 // indirect

// The other modules of this repository, from this checkout: go.work does
// the same for the workspace, these make GOWORK=off builds work too.
replace (
	github.com/golocker/locker => ..
	github.com/golocker/locker/internal/testserver/zkserver => ../internal/testserver/zkserver
)
