#!/usr/bin/env bash
# What a user pays for one driver: for each driver, a fresh module outside
# the repository imports the root package github.com/golocker/locker and
# that one driver (a main that calls locker.Open), with replace directives
# pointing at this checkout's modules; go mod tidy, then go list -m all
# (its count includes the user's own module) and the lines of go.sum.
#
# Rules, each a failure when broken:
#
#  1. No module of another backend's client (go-redis, etcd, go-zookeeper,
#     GORM and the SQL drivers, mongo-driver), and for every driver no
#     testcontainers, Docker (docker, moby, containerd), etcd's server or
#     FerretDB: those are what the tests of other modules need.
#  2. At most BOUND modules, where BOUND is what a module that imports only
#     the store's client library gets, plus 4 for golocker's own: the root
#     module, the driver, the driver's test-server module (a requirement of
#     the driver's tests, released with the set: go mod tidy downloads it
#     for them, but graph pruning leaves its go.mod's requirements out, so
#     it brings nothing more) and go.uber.org/goleak (required by the root
#     module's conformance package). The client-only module imports the client
#     packages the driver imports and requires what the driver's go.mod
#     requires, less golocker's modules and goleak; `bash
#     scripts/footprint.sh -baseline` measures it again. Redis's bound, 15,
#     is also the one issue 15 set.
#
#	driver     client-only  bound   client
#	redislock           11     15   github.com/redis/go-redis/v9
#	etcdlock            83     87   go.etcd.io/etcd/client/v3, api/v3 and zap
#	zklock               2      6   github.com/go-zookeeper/zk
#	mysqllock           49     53   GORM, its mysql/postgres/sqlite drivers, pgx
#	mongolock           19     23   go.mongodb.org/mongo-driver/v2
#
# (Measured with Go 1.26 in November 2026.) When a client's upgrade moves
# its own count, measure again and move the bound with it.
#
# The replace directives stand in for a release: scripts/release's test
# builds the same user modules from released tags and holds their graphs to
# these bounds too.
#
# It prints a table and exits 1 on a violation. With the module cache warm
# it takes a few seconds per driver.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

# Each driver and its bound. The program is built, never run.
drivers=(
	"redislock 15"
	"etcdlock 87"
	"zklock 6"
	"mysqllock 53"
	"mongolock 23"
)

# Module path prefixes that belong to each backend's client.
declare -A client=(
	[redislock]='github.com/redis/go-redis/'
	[etcdlock]='go.etcd.io/etcd/'
	[zklock]='github.com/go-zookeeper/zk'
	[mysqllock]='gorm.io/ github.com/go-sql-driver/mysql github.com/jackc/pgx github.com/glebarez/ modernc.org/sqlite github.com/mattn/go-sqlite3'
	[mongolock]='go.mongodb.org/mongo-driver'
)
never='github.com/testcontainers/ github.com/docker/ github.com/moby/ github.com/containerd/ go.etcd.io/etcd/server/ github.com/FerretDB/'

# Every module of this checkout, replaced by its directory.
mapfile -t modules < <(GOWORK= go work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p')

work=$(mktemp -d "${TMPDIR:-/tmp}/golocker-footprint.XXXXXX")
trap '[ -n "${FOOTPRINT_KEEP:-}" ] || rm -rf "$work"' EXIT

export GOWORK=off GOFLAGS=-mod=mod

# -baseline: print what a module importing only each driver's client gets.
if [ "${1:-}" = -baseline ]; then
	printf '%-10s %11s %13s\n' driver client-only "go.sum lines"
	for entry in "${drivers[@]}"; do
		read -r driver _ <<<"$entry"
		dir="$work/$driver-client"
		mkdir -p "$dir"
		imports=$(cd "$driver" && go list -f '{{join .Imports "\n"}}' . | grep '\.' | grep -v '^github.com/golocker/')
		printf 'module example.com/footprint/client\n\ngo 1.26.0\n' >"$dir/go.mod"
		# The driver's requirements: the lines "path version" of its go.mod's
		# require blocks and lines, less golocker's modules and goleak.
		awk '/^require \(/ {r=1; next} r && /^\)/ {r=0} r || /^require / {print}' "$driver/go.mod" |
			sed -e 's/^require //' -e 's#//.*##' | awk 'NF == 2 {print $1 "@" $2}' |
			grep -v -e '^github.com/golocker/' -e '^go.uber.org/goleak@' |
			while read -r req; do (cd "$dir" && go mod edit -require="$req"); done
		{
			printf 'package main\n\nimport (\n'
			for p in $imports; do printf '\t_ "%s"\n' "$p"; done
			printf ')\n\nfunc main() {}\n'
		} >"$dir/main.go"
		(cd "$dir" && go mod tidy) >"$dir/log" 2>&1 || { sed 's/^/  /' "$dir/log"; exit 1; }
		printf '%-10s %11d %13d\n' "$driver" "$(cd "$dir" && go list -m all | wc -l)" "$(wc -l <"$dir/go.sum")"
	done
	exit 0
fi

status=0
printf '%-10s %8s %6s %13s  %s\n' driver modules bound "go.sum lines" result
for entry in "${drivers[@]}"; do
	read -r driver bound <<<"$entry"
	dir="$work/$driver"
	mkdir -p "$dir"
	{
		printf 'module example.com/footprint/%s\n\ngo 1.26.0\n\n' "$driver"
		printf 'require (\n\tgithub.com/golocker/locker v0.0.0-00010101000000-000000000000\n'
		printf '\tgithub.com/golocker/locker/%s v0.0.0-00010101000000-000000000000\n)\n\n' "$driver"
		printf 'replace (\n'
		for m in "${modules[@]}"; do
			m=${m#./}
			if [ "$m" = . ]; then
				printf '\tgithub.com/golocker/locker => %s\n' "$repo"
			else
				printf '\tgithub.com/golocker/locker/%s => %s/%s\n' "$m" "$repo" "$m"
			fi
		done
		printf ')\n'
	} >"$dir/go.mod"
	cat >"$dir/main.go" <<EOF
package main

import (
	"context"
	"fmt"

	"github.com/golocker/locker"
	_ "github.com/golocker/locker/$driver"
)

func main() {
	c, err := locker.Open(context.Background(), "${driver%lock}://127.0.0.1:1/")
	fmt.Println(c, err)
}
EOF
	(cd "$dir" && go mod tidy && go build -o /dev/null .) >"$dir/log" 2>&1 || {
		echo "footprint: $driver: go mod tidy or go build failed:"
		sed 's/^/  /' "$dir/log"
		status=1
		continue
	}
	list=$(cd "$dir" && go list -m all | awk '{print $1}')
	count=$(echo "$list" | wc -l)
	sums=$(wc -l <"$dir/go.sum")
	problems=()
	((count <= bound)) || problems+=("$count modules > $bound")
	for other in "${!client[@]}"; do
		[ "$other" = "$driver" ] && continue
		for prefix in ${client[$other]}; do
			if bad=$(echo "$list" | grep -F "$prefix"); then
				problems+=("$other's client: $(echo $bad)")
			fi
		done
	done
	for prefix in $never; do
		if bad=$(echo "$list" | grep -F "$prefix"); then
			problems+=("test-only dependency: $(echo $bad)")
		fi
	done
	result=ok
	if ((${#problems[@]} > 0)); then
		result="FAIL: ${problems[0]}"
		for p in "${problems[@]:1}"; do result+="; $p"; done
		status=1
	fi
	printf '%-10s %8d %6d %13d  %s\n' "$driver" "$count" "$bound" "$sums" "$result"
done
if ((status != 0)); then
	echo "footprint: a driver's users would get more than its store's client (see the comment at the top of scripts/footprint.sh)"
fi
exit $status
