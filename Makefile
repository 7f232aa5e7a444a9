# golocker — see README.md. Every target works on a fresh machine: `test`
# installs the servers the tests start (Debian packages) when one is missing.

GO            ?= go
STATICCHECK   ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME      ?= 30s

# The modules of the workspace (go.work), each with its own go.mod
# (docs/decisions.md, "One module per driver"): the library, the drivers,
# the test servers of each backend, lockctl and the benchmarks. `go test
# ./...` at the root covers the root module only, so every target below
# names the modules' packages itself (in one go command, so that packages
# of different modules still run in parallel). scripts/modules.sh checks
# that this list, go.work and the go.mod files in the tree agree.
MODULES = . \
	redislock etcdlock zklock mysqllock mongolock \
	internal/testserver/redisserver internal/testserver/etcdserver \
	internal/testserver/zkserver internal/testserver/sqlserver \
	internal/testserver/mongoserver \
	otellocker cmd/lockctl bench chaos
# The modules of the helper commands that tests build on demand: not in the
# workspace, so they are built, vetted and tidied on their own (GOWORK=off).
HELPER_MODULES = internal/testserver/dockerhelper \
	internal/testserver/etcdserver/etcdhelper \
	internal/testserver/mongoserver/ferretdb \
	$(EXAMPLE_MODULES) $(TOOL_MODULES)
# Example programs with dependencies of their own (the Prometheus exporter,
# the demo), kept out of the workspace like the helpers; `make test` tests
# them too.
EXAMPLE_MODULES = otellocker/example/prometheus examples/demo
# The repository's own tools with dependencies that no user may get (the
# release command needs golang.org/x/mod): out of the workspace, never
# released; `make test` tests them too.
TOOL_MODULES = scripts/release
# ./... in each module, e.g. ./redislock/...
PACKAGES = $(subst ././...,./...,$(patsubst %,./%/...,$(MODULES)))

.PHONY: all demo test test-short lint docs fuzz deps helpers install bench tidy download footprint release loadreport chaos chaos-short

all: lint test

## demo: worker processes contend for a lock on an embedded SQLite file,
## one is frozen past its lease (examples/demo: package locker and the SQL
## driver only, outside the workspace, so that a fresh machine downloads
## and builds nothing else). Built without optimizations (-N -l), which
## takes half the CPU of a cold build (the SQLite driver is 10 MB of
## generated Go) and changes nothing a demo shows; without cgo, so no C
## compiler is needed.
demo:
	cd examples/demo && GOWORK=off CGO_ENABLED=0 $(GO) run -gcflags='all=-N -l' .

## deps: install the server binaries the tests need (idempotent)
deps:
	bash scripts/install-test-deps.sh

## helpers: build the helper commands the tests start (etcd, and FerretDB
## where there is no mongod) into the user cache directory, unless built;
## the first build takes a minute or more of both cores, which would
## otherwise slow the servers of the tests running beside it
helpers:
	$(GO) test -count=1 -run '^TestBuildHelper$$' ./internal/testserver/etcdserver ./internal/testserver/mongoserver

## test: every test of every module, with the race detector, against real servers
test: deps helpers
	$(GO) test -race -timeout 20m $(PACKAGES)
	@for m in $(EXAMPLE_MODULES) $(TOOL_MODULES); do \
		(cd $$m && GOWORK=off $(GO) test -race ./...) || exit 1; done

## test-short: the packages that need no server
test-short:
	$(GO) test -race . ./backend/... ./locallock/... ./conformance/... ./examples/... ./internal/matrix/... ./internal/doccheck/... ./internal/testserver

## install: install lockctl into $(go env GOPATH)/bin
install:
	$(GO) install ./cmd/lockctl

## lint: gofmt over the tree; the module lists; go vet in every module on
## its own (GOWORK=off: each go.mod and go.sum must suffice); staticcheck
lint:
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	@bash scripts/modules.sh $(MODULES) -- $(HELPER_MODULES)
	@for m in $(MODULES) $(HELPER_MODULES); do \
		echo "go vet: $$m"; (cd $$m && GOWORK=off $(GO) vet ./...) || exit 1; done
	$(GO) run $(STATICCHECK) $(PACKAGES)
	@for m in $(HELPER_MODULES); do \
		echo "staticcheck: $$m"; (cd $$m && GOWORK=off $(GO) run $(STATICCHECK) ./...) || exit 1; done

## download: download the dependencies of every module, helpers included
download:
	@for m in $(MODULES) $(HELPER_MODULES); do \
		(cd $$m && GOWORK=off $(GO) mod download) || exit 1; done

## tidy: go mod tidy in every module (bench needs -e, see bench/README.md)
tidy:
	@for m in $(MODULES) $(HELPER_MODULES); do \
		e=; [ $$m = bench ] && e=-e; \
		(cd $$m && GOWORK=off GOFLAGS=-mod=mod $(GO) mod tidy $$e) || exit 1; done

## footprint: the module graph a user gets with each driver (scripts/footprint.sh)
footprint:
	bash scripts/footprint.sh

## release: release every module of the workspace at VERSION (vX.Y.Z) in
## this clone, pushing nothing: the release commit, where each go.mod
## requires the others at VERSION and replaces none, tagged VERSION,
## redislock/VERSION, ...; then the development commit, with the replace
## directives back (scripts/release, docs/decisions.md D29)
release:
	@case "$(VERSION)" in v*) ;; *) echo "usage: make release VERSION=vX.Y.Z"; exit 2;; esac
	@bash scripts/modules.sh $(MODULES) -- $(HELPER_MODULES)
	cd scripts/release && GOWORK=off $(GO) run . -C $(CURDIR) $(VERSION)

## docs: rerun the conformance suites and regenerate docs/feature-matrix.md
docs: deps helpers
	LOCKER_UPDATE_MATRIX=1 $(GO) test -count=1 -run '^TestConformance' $(PACKAGES)
	LOCKER_UPDATE_MATRIX=1 $(GO) test -count=1 -run '^TestFeatureMatrixIsFresh$$' ./internal/matrix

## fuzz: run each fuzz target for FUZZTIME
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzRedact$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzNames$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzScrub$$' -fuzztime $(FUZZTIME) ./internal/driverkit

# bench: passes of the uncontended and the contended benchmarks (the table
# shows medians and spreads), the length of one contended run, where the
# output goes (under bench/).
BENCH_COUNT             ?= 3
BENCH_UNCONTENDED_COUNT ?= 10
BENCH_DURATION          ?= 3s
BENCH_OUT               ?= results/latest
# Backends the benchmarks run (bench/README.md): redis, etcd, zk, mysql,
# postgres, sqlite, mongo; sql = the three SQL ones; all. postgres,mysql
# measures golocker's SQL driver against the database's own lock (it adds
# minutes, so it is not in the default).
BENCH_BACKENDS          ?= redis
BENCHSTAT               ?= golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

.PHONY: bench

# The server binaries the chosen backends need, which `make deps` installs
# when one is missing.
comma := ,
BENCH_BACKEND_LIST = $(subst $(comma), ,$(BENCH_BACKENDS))
BENCH_SERVERS = redis-server \
	$(if $(filter mysql sql all,$(BENCH_BACKEND_LIST)),mariadbd) \
	$(if $(filter postgres sql all,$(BENCH_BACKEND_LIST)),postgres)

# loadreport: the length of each load run of docs/benchmarks.md.
LOADREPORT_DURATION ?= 10s

## loadreport: run the load scenarios of docs/benchmarks.md (lockctl load
## hot-name, zipf, long-holds, crash-stall) on Redis, etcd, ZooKeeper, PostgreSQL,
## MariaDB and SQLite, one after the other, and regenerate docs/benchmarks/:
## results.md (the tables), the raw series (JSON) and the reports' charts (PNG,
## by headless Chromium). No race detector: these are figures.
loadreport: deps helpers
	LOCKER_LOADREPORT_DIR=$(CURDIR)/docs/benchmarks LOCKER_LOADREPORT_DURATION=$(LOADREPORT_DURATION) \
		$(GO) test -count=1 -timeout 60m -run '^TestLoadReportForDocs$$' -v ./cmd/lockctl

## bench: golocker's Redis driver against go-redsync/redsync and bsm/redislock,
## and its SQL driver against pg_advisory_lock and GET_LOCK (bench/README.md,
## BENCH_BACKENDS); raw output in bench/$(BENCH_OUT).txt, tables on stdout
## and in bench/$(BENCH_OUT)-table.md. Each pass is one run of the test
## binary (one redis-server) with every configuration once, so the runs of
## different configurations alternate in time and a change of the machine's
## load falls on all of them.
bench:
	@PATH="$$PATH:/usr/sbin$$(for d in /usr/lib/postgresql/*/bin; do printf ':%s' "$$d"; done)"; \
	for b in $(BENCH_SERVERS); do \
		command -v $$b >/dev/null 2>&1 || { $(MAKE) deps; break; }; done
	@mkdir -p bench/results
	@cd bench && { \
		echo "date: $$(date -u +%Y-%m-%dT%H:%M:%SZ)"; \
		echo "commit: $$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"; \
		echo "go: $$($(GO) env GOVERSION)"; \
		echo "redis: $$(redis-server --version | sed 's/^Redis server //')"; \
		echo "kernel: $$(uname -sr)"; \
		echo "cores: $$(nproc)"; \
		echo "loadavg-before: $$(cut -d' ' -f1-3 /proc/loadavg)"; \
		echo "backends: $(BENCH_BACKENDS)"; \
		echo "contended: hold=1ms think=1ms duration=$(BENCH_DURATION) passes=$(BENCH_COUNT)"; \
	} > $(BENCH_OUT).txt
	cd bench && $(GO) test -c -o $(BENCH_OUT).test . && for i in $$(seq $(BENCH_UNCONTENDED_COUNT)); do \
		./$(BENCH_OUT).test -test.run '^$$' -test.bench '^Benchmark(Backend)?Uncontended(Interleaved)?$$' -test.benchtime 1x -test.timeout 10m -bench.backends $(BENCH_BACKENDS) \
			>> $(BENCH_OUT).txt 2>&1 || { tail -20 $(BENCH_OUT).txt; exit 1; }; done
	@cd bench && for i in $$(seq $(BENCH_COUNT)); do \
		echo "bench: contended pass $$i of $(BENCH_COUNT) ($$(cut -d' ' -f1 /proc/loadavg) load)"; \
		./$(BENCH_OUT).test -test.run '^$$' -test.bench '^Benchmark(Backend)?Contended$$' -test.benchtime 1x -test.timeout 30m -bench.backends $(BENCH_BACKENDS) \
			-contended.duration $(BENCH_DURATION) >> $(BENCH_OUT).txt 2>&1 || { tail -20 $(BENCH_OUT).txt; exit 1; }; done
	@cd bench && rm -f $(BENCH_OUT).test && echo "loadavg-after: $$(cut -d' ' -f1-3 /proc/loadavg)" >> $(BENCH_OUT).txt
	cd bench && $(GO) run $(BENCHSTAT) -filter '.name:(Uncontended OR BackendUncontended)' -row .name -col .fullname $(BENCH_OUT).txt
	cd bench && $(GO) run ./cmd/table $(BENCH_OUT).txt | tee $(BENCH_OUT)-table.md

# chaos: the fault-injection run (chaos/, docs/reliability.md). CHAOS_BACKENDS
# is a comma-separated list or all; the long run writes one JSON file per
# run under chaos/results/.
CHAOS_BACKENDS       ?= all
CHAOS_DURATION       ?= 60s
CHAOS_RUNS           ?= 3
CHAOS_SHORT_DURATION ?= 10s
CHAOS_FLAGS          ?=

## chaos: every backend and topology, CHAOS_RUNS runs of CHAOS_DURATION
## each, under faults; one summary line per run; fails on an unexplained
## violation
chaos: deps helpers
	cd chaos && $(GO) build -o results/chaos . && ./results/chaos -backends $(CHAOS_BACKENDS) \
		-duration $(CHAOS_DURATION) -runs $(CHAOS_RUNS) -out results/latest $(CHAOS_FLAGS)

## chaos-short: the same, one short run per backend (CI)
chaos-short: deps helpers
	cd chaos && $(GO) build -o results/chaos . && ./results/chaos -backends $(CHAOS_BACKENDS) \
		-duration $(CHAOS_SHORT_DURATION) -runs 1 $(CHAOS_FLAGS)
