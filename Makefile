# groundskeeper: lint, test environment, tests and benchmarks.
#
#   make test      install what is missing, lint, then run every test
#   make testenv   build or install only the test environment's components
#   make lint      gofmt, go mod tidy, go vet, staticcheck
#   make bench     run the benchmarks
#   make chaos     the long chaos run (internal/chaos): CHAOS_DURATION of
#                  faults (default 20m), CHAOS_SEED to replay a seed
#   make chaos-short  its short version (60 s of faults, a fixed seed)
#
# Components are cached outside the clone (see hack/testenv.sh) and linked
# into .cache/bin, where internal/testenv finds them.

SHELL := /usr/bin/env bash
GO    ?= go
BIN   := $(CURDIR)/.cache/bin

# Integration tests start real control planes and object stores: give them
# room on a 2-core machine.
TEST_FLAGS  ?= -race -timeout 30m
BENCH_FLAGS ?= -run '^$$' -bench . -benchmem -timeout 60m

.PHONY: all test testenv lint vet fmt-check tidy-check staticcheck bench chaos chaos-short

all: test

testenv:
	hack/testenv.sh

test: testenv lint
	$(GO) test $(TEST_FLAGS) ./...

lint: fmt-check tidy-check vet staticcheck

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# go.mod and go.sum must already be what go mod tidy makes them.
tidy-check:
	$(GO) mod tidy -diff

vet:
	$(GO) vet ./...

staticcheck:
	@[ -x $(BIN)/staticcheck ] || hack/testenv.sh staticcheck
	$(BIN)/staticcheck ./...

bench: testenv
	$(GO) test $(BENCH_FLAGS) ./...

# The long chaos run of each workload, with its summary table. A random
# seed unless CHAOS_SEED is set; the seed is printed. chaos-short runs the
# short version (60 s of faults, a fixed seed); it joins make test once it
# has run clean on many seeds. make test runs the checker's planted-bug
# tests.
CHAOS_DURATION ?= 20m
CHAOS_SEED     ?=
CHAOS_TIMEOUT  ?= 90m
chaos: testenv
	CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_SEED=$(CHAOS_SEED) \
		$(GO) test -race -count=1 -v -run '^TestChaos$$' -timeout $(CHAOS_TIMEOUT) ./examples/aerospike-gc

chaos-short: testenv
	CHAOS_SHORT=1 CHAOS_SEED=$(CHAOS_SEED) \
		$(GO) test -race -count=1 -v -run '^TestChaos$$' -timeout 20m ./examples/aerospike-gc
