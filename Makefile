# groundskeeper: lint, test environment, tests and benchmarks.
#
#   make test      install what is missing, lint, then run every test
#   make testenv   build or install only the test environment's components
#   make lint      gofmt, go mod tidy, go vet, staticcheck, download size
#   make bench     run the benchmarks
#   make chaos     the long chaos runs (internal/chaos): CHAOS_DURATION of
#                  faults per workload (default 20m), CHAOS_SEED to replay
#   make chaos-short  only the short chaos runs, which make test runs too
#
# Components are cached outside the clone (see hack/testenv.sh) and linked
# into .cache/bin, where internal/testenv finds them.

SHELL := /usr/bin/env bash
GO    ?= go
BIN   := $(CURDIR)/.cache/bin

# Integration tests start real control planes and object stores: give them
# room on a 2-core machine. Three packages at once (go test's default is
# one per core): the chaos and end-to-end suites spend most of their time
# waiting on timelines, so a third package uses the idle half of the CPU
# (measured on 2 cores: 12½ minutes instead of 16 for the whole suite).
TEST_FLAGS  ?= -race -timeout 30m -p 3
BENCH_FLAGS ?= -run '^$$' -bench . -benchmem -timeout 60m

.PHONY: all test testenv lint vet fmt-check tidy-check staticcheck size-check bench chaos chaos-short

all: test

testenv:
	hack/testenv.sh

test: testenv lint
	$(GO) test $(TEST_FLAGS) ./...

lint: fmt-check tidy-check vet staticcheck size-check

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

# What go get downloads: no tracked file over 1 MiB unless allowed in
# hack/large-files.allow, and the module zip of HEAD, built as the Go module
# proxy builds it, under its budget (internal/tools/modsize).
size-check:
	cd internal/tools/modsize && $(GO) run . -C ../../.. -budget 2MiB -allow hack/large-files.allow

bench: testenv
	$(GO) test $(BENCH_FLAGS) ./...

# The chaos runs (internal/chaos): every example's TestChaos* but the
# planted-bug tests (fdb-lock has two, one per lock backend), with its
# summary table. make chaos is the long run: CHAOS_DURATION of faults for
# each workload (default 20m), one workload at a time (CHAOS_PARALLEL), on
# a random seed unless CHAOS_SEED is set; each prints its seed. make test
# runs the short runs (60 s of faults, a fixed seed each); chaos-short runs
# only them, verbosely, and CHAOS_SEED replays another seed.
CHAOS_DURATION ?= 20m
CHAOS_SEED     ?=
CHAOS_PARALLEL ?= 1
CHAOS_TIMEOUT  ?= 75m
CHAOS_PACKAGES ?= ./examples/...
chaos: testenv
	CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_SEED=$(CHAOS_SEED) \
		$(GO) test -race -count=1 -v -p $(CHAOS_PARALLEL) -run '^TestChaos' -skip 'PlantedBugs' -timeout $(CHAOS_TIMEOUT) $(CHAOS_PACKAGES)

chaos-short: testenv
	CHAOS_SEED=$(CHAOS_SEED) \
		$(GO) test -race -count=1 -v -run '^TestChaos' -skip 'PlantedBugs' -timeout 20m $(CHAOS_PACKAGES)
