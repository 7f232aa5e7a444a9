module github.com/golocker/locker/bench

go 1.26.0

require (
	github.com/bsm/redislock v0.9.4
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/go-sql-driver/mysql v1.10.1
	github.com/go-zookeeper/zk v1.0.4
	github.com/golocker/locker v0.0.0-00010101000000-000000000000
	github.com/golocker/locker/etcdlock v0.0.0-00010101000000-000000000000
	github.com/golocker/locker/internal/testserver/etcdserver v0.0.0-00010101000000-000000000000
	github.com/golocker/locker/internal/testserver/mongoserver v0.0.0-00010101000000-000000000000
	github.com/golocker/locker/internal/testserver/redisserver v0.0.0-00010101000000-000000000000
	github.com/golocker/locker/internal/testserver/sqlserver v0.0.0-00010101000000-000000000000
	github.com/golocker/locker/internal/testserver/zkserver v0.0.0-00010101000000-000000000000
	github.com/golocker/locker/mongolock v0.0.0-00010101000000-000000000000
	github.com/golocker/locker/mysqllock v0.0.0-00010101000000-000000000000
	github.com/golocker/locker/redislock v0.0.0-00010101000000-000000000000
	github.com/golocker/locker/zklock v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.12.0
	github.com/redis/go-redis/v9 v9.23.0
	go.etcd.io/etcd/client/v3 v3.6.16
	go.opentelemetry.io/otel/sdk v1.45.0
	go.opentelemetry.io/otel/sdk/metric v1.45.0
	go.uber.org/zap v1.27.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/coreos/go-semver v0.3.1 // indirect
	github.com/coreos/go-systemd/v22 v22.5.0 // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/glebarez/go-sqlite v1.21.2 // indirect
	github.com/glebarez/sqlite v1.11.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/golocker/locker/otellocker v0.0.0-00010101000000-000000000000
	github.com/google/uuid v1.6.0 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.29.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/jinzhu/inflection v1.0.0 // indirect
	github.com/jinzhu/now v1.1.5 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/mattn/go-isatty v0.0.17 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	github.com/xdg-go/pbkdf2 v1.0.0 // indirect
	github.com/xdg-go/scram v1.2.0 // indirect
	github.com/xdg-go/stringprep v1.0.4 // indirect
	github.com/youmark/pkcs8 v0.0.0-20240726163527-a2c0da244d78 // indirect
	go.etcd.io/etcd/api/v3 v3.6.16 // indirect
	go.etcd.io/etcd/client/pkg/v3 v3.6.16 // indirect
	go.mongodb.org/mongo-driver/v2 v2.9.3 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.45.0 // indirect
	go.opentelemetry.io/otel/metric v1.45.0 // indirect
	go.opentelemetry.io/otel/trace v1.45.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260803160001-6ac0973c030d // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260803160001-6ac0973c030d // indirect
	google.golang.org/grpc v1.83.2 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
	gorm.io/driver/mysql v1.6.0 // indirect
	gorm.io/driver/postgres v1.6.3
	gorm.io/gorm v1.31.2
	modernc.org/libc v1.22.5 // indirect
	modernc.org/mathutil v1.5.0 // indirect
	modernc.org/memory v1.5.0 // indirect
	modernc.org/sqlite v1.23.1 // indirect
)

// The other modules of this repository, from this checkout: go.work does
// the same for the workspace, these make GOWORK=off builds work too.
replace (
	github.com/golocker/locker => ..
	github.com/golocker/locker/etcdlock => ../etcdlock
	github.com/golocker/locker/internal/testserver/etcdserver => ../internal/testserver/etcdserver
	github.com/golocker/locker/internal/testserver/mongoserver => ../internal/testserver/mongoserver
	github.com/golocker/locker/internal/testserver/redisserver => ../internal/testserver/redisserver
	github.com/golocker/locker/internal/testserver/sqlserver => ../internal/testserver/sqlserver
	github.com/golocker/locker/internal/testserver/zkserver => ../internal/testserver/zkserver
	github.com/golocker/locker/mongolock => ../mongolock
	github.com/golocker/locker/mysqllock => ../mysqllock
	github.com/golocker/locker/redislock => ../redislock
	github.com/golocker/locker/zklock => ../zklock
)

replace github.com/golocker/locker/otellocker => ../otellocker
