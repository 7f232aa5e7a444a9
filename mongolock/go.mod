module github.com/golocker/locker/mongolock

go 1.26.0

require (
	github.com/golocker/locker v0.0.0-00010101000000-000000000000
	github.com/golocker/locker/internal/testserver/mongoserver v0.0.0-00010101000000-000000000000
	go.mongodb.org/mongo-driver/v2 v2.9.3
)

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/xdg-go/pbkdf2 v1.0.0 // indirect
	github.com/xdg-go/scram v1.2.0 // indirect
	github.com/xdg-go/stringprep v1.0.4 // indirect
	github.com/youmark/pkcs8 v0.0.0-20240726163527-a2c0da244d78 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/crypto v0.53.0 // indirect
	golang.org/x/sync v0.21.0 // indirect
	golang.org/x/text v0.39.0 // indirect
)

// The other modules of this repository, from this checkout: go.work does
// the same for the workspace, these make GOWORK=off builds work too.
replace (
	github.com/golocker/locker => ..
	github.com/golocker/locker/internal/testserver/mongoserver => ../internal/testserver/mongoserver
)
