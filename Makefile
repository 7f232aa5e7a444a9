# golocker — see README.md. Every target works on a fresh machine: `test`
# installs the servers the tests start (Debian packages) when one is missing.

GO            ?= go
STATICCHECK   ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME      ?= 30s

.PHONY: all demo test test-short lint docs fuzz deps install bench

all: lint test

## demo: the main job on the embedded SQLite backend, with nothing installed
demo:
	$(GO) run ./cmd/lockctl demo

## deps: install the server binaries the tests need (idempotent)
deps:
	bash scripts/install-test-deps.sh

## test: every test, with the race detector, against real servers
test: deps
	$(GO) test -race -timeout 20m ./...

## test-short: the packages that need no server
test-short:
	$(GO) test -race . ./backend/... ./locallock/... ./conformance/... ./examples/... ./internal/matrix/...

## install: install lockctl into $(go env GOPATH)/bin
install:
	$(GO) install ./cmd/lockctl

## lint: gofmt, go vet, staticcheck
lint:
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

## docs: rerun the conformance suites and regenerate docs/feature-matrix.md
docs: deps
	LOCKER_UPDATE_MATRIX=1 $(GO) test -count=1 -run '^TestConformance' ./...
	LOCKER_UPDATE_MATRIX=1 $(GO) test -count=1 -run '^TestFeatureMatrixIsFresh$$' ./internal/matrix

## fuzz: run each fuzz target for FUZZTIME
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzRedact$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzNames$$' -fuzztime $(FUZZTIME) .

# bench: passes of the uncontended and the contended benchmarks (the table
# shows medians and spreads), the length of one contended run, where the
# output goes (under bench/).
BENCH_COUNT             ?= 3
BENCH_UNCONTENDED_COUNT ?= 10
BENCH_DURATION          ?= 3s
BENCH_OUT               ?= results/latest
# Backends the benchmarks run (bench/README.md): redis, etcd, zk, mysql,
# postgres, sqlite, mongo; sql = the three SQL ones; all.
BENCH_BACKENDS          ?= redis
BENCHSTAT               ?= golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

.PHONY: bench

## bench: golocker's Redis driver against go-redsync/redsync and bsm/redislock
## (bench/README.md); raw output in bench/$(BENCH_OUT).txt, tables on stdout
## and in bench/$(BENCH_OUT)-table.md. Each pass is one run of the test
## binary (one redis-server) with every configuration once, so the runs of
## different configurations alternate in time and a change of the machine's
## load falls on all of them.
bench:
	@command -v redis-server >/dev/null 2>&1 || $(MAKE) deps
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
