# groundskeeper: lint, test environment, tests and benchmarks.
#
#   make test      install what is missing, run the quick checks, then
#                  every test at the newest versions, with the slow checks
#                  beside them (govulncheck, staticcheck, the library's unit
#                  tests at the oldest versions it supports, its
#                  documentation pages)
#   make testenv   build or install only the test environment's components
#   make lint      gofmt, go mod tidy, go vet, staticcheck, download size,
#                  supported versions, what each package costs its
#                  importers, the exported API against api/*.txt,
#                  known vulnerabilities (govulncheck)
#   make api       record the exported API in api/*.txt after an intended
#                  change (RELEASING.md)
#   make deps-budget  rewrite hack/deps-budget.txt after an intended change
#                  of what a package pulls in
#   make oldest    build, vet and unit-test the library at the oldest versions
#   make docs      check the library's pages as pkg.go.dev will show them
#                  (hack/pkgsite.sh; hack/pkgsite.sh alone serves them)
#   make bench     run the benchmarks; the curves (internal/benchcurve) are
#                  printed as tables and written as CSV files to BENCH_OUT
#                  (bench/out, ignored by git), then charted as SVG files
#                  beside them (internal/tools/benchchart); BENCH_MAX_SIZE
#                  leaves out the larger sizes of the curves
#   make bench-charts  chart the CSV files of BENCH_OUT again
#   make chaos     the long chaos runs (examples/internal/chaos):
#                  CHAOS_DURATION of faults per workload (default 20m),
#                  CHAOS_SEED to replay
#   make chaos-short  only the short chaos runs, which make test runs too
#   make checkers  the chaos checkers' planted-bug tests
#                  (TestChaosCheckerCatchesPlantedBugs: each check shown
#                  failing on a planted bug); make chaos runs them too, make
#                  test leaves them out
#   make soak      the library's long tests at full size (internal/soak):
#                  fixtures of thousands of objects that make test writes
#                  smaller; make chaos runs it too
#   make property  the ownership property tests on fresh seeds for
#                  PROPERTY_DURATION each (default 10m; make chaos runs
#                  them too), PROPERTY_SEED to replay
#
# Components are cached outside the clone (see hack/testenv.sh) and linked
# into .cache/bin, where testenv finds them.
#
# Modules: the library is the root module; the examples with their end-to-end
# and chaos suites are the module in examples/, the kubectl plugin (cobra,
# k8s.io/cli-runtime) the module in cmd/kubectl-groundskeeper, and the tools
# that build the test components are modules under internal/tools. go.work
# joins the root, examples and plugin modules, so that commands run from the
# root build the library at the newest versions the examples require;
# GOWORK=off builds the library alone, at the oldest versions its go.mod
# requires. Never run `go work sync`: it would raise the library's go.mod to
# the newest versions.

SHELL := /usr/bin/env bash
GO    ?= go
BIN   := $(CURDIR)/.cache/bin

# Integration tests start real control planes and object stores: give them
# room on a 2-core machine. Three packages at once (go test's default is
# one per core): the chaos and end-to-end suites spend most of their time
# waiting on timelines, so a third package uses the idle half of the CPU
# (measured on 2 cores when the suite was smaller: 12½ minutes instead of
# 16; the whole make test took 23 minutes on 2026-11-28).
TEST_FLAGS  ?= -race -timeout 30m -p 3
# What make test leaves to its own targets: the planted-bug tests of the
# chaos checkers (make checkers), 1-4 minutes each, which test the
# examples' checkers rather than the library.
TEST_SKIP   ?= TestChaosCheckerCatchesPlantedBugs
# Where the test components keep their data (testenv.DataDirEnv): a
# memory file system where the machine has one. MinIO syncs every object
# it writes, which on a disk costs more than the request (backupstore's
# TestDeletePrefixVersioned: 46 s on disk, 22 s on tmpfs). Empty for the
# system's temporary directory; make bench leaves it unset, so that its
# figures are a disk's.
TESTENV_DATA ?= $(shell test -d /dev/shm -a -w /dev/shm && echo /dev/shm)
BENCH_FLAGS ?= -run '^$$' -bench . -benchmem -timeout 180m
BENCH_OUT   ?= $(CURDIR)/bench/out

# Every package of the workspace: the library's, the examples' and the
# kubectl plugin's.
PACKAGES := ./... ./examples/... ./cmd/kubectl-groundskeeper/...
# Every module, for go mod tidy.
MODULES  := . examples cmd/kubectl-groundskeeper internal/tools/etcd internal/tools/kube internal/tools/kwok internal/tools/modsize internal/tools/depsbudget internal/tools/vulncheck internal/tools/benchchart internal/tools/apicheck

# The supported range (README, "Supported versions"): the library's go.mod
# requires the oldest, the examples' go.mod the newest.
OLDEST_GO     := 1.25.0
OLDEST_K8S    := v0.35.0
OLDEST_CR     := v0.23.0
NEWEST_K8S    := v0.37.2
NEWEST_CR     := v0.25.2

.PHONY: api api-check all test testenv tools-test lint vet fmt-check tidy-check versions-check staticcheck size-check deps-check deps-budget vulncheck oldest docs bench bench-charts chaos chaos-short checkers property soak

all: test

testenv:
	hack/testenv.sh

# make test runs the checks that take seconds first, CHECK_JOBS at a time,
# so that what they catch fails at once; then the tests, with the checks
# that take minutes (govulncheck, the oldest versions' build and unit
# tests, staticcheck, the documentation pages) beside them under nice
# (hack/beside.sh): the integration tests spend most of their time waiting
# on components, and leave the CPU to them. Each check's output is printed
# whole when it ends; those beside the tests after the tests'.
QUICK_CHECKS := fmt-check tidy-check versions-check vet size-check deps-check api-check tools-test
SLOW_CHECKS  := vulncheck oldest staticcheck docs
CHECK_JOBS ?= 3
# The Go commands of make test build with -trimpath: the build cache then
# serves a fresh clone, whatever its directory, what an earlier clone
# compiled (without it every package of the project is compiled again in
# each new directory, which a clean-clone CI is: measured, linking the
# test binaries of all packages took 179 s in a new clone, 106 s with
# -trimpath). hack/testenv.sh builds the components without it.
TEST_GOFLAGS := $(strip $(GOFLAGS) -trimpath)
# The test binaries are linked without DWARF (-w): panics, race reports
# and t.Log keep their file:line (those come from the symbol table), and
# each link costs a quarter less (measured: backupstore's test binary with
# -race, 17.0 s of CPU with DWARF, 12.8 without; linking took 358 of the
# 2,900 CPU-seconds of a make test). A debugger needs DWARF: give it a
# test binary built with go test -c.
TEST_LDFLAGS ?= -ldflags=-w
# The packages whose tests take minutes come first: go test starts
# packages in the order given, so that they do not start last and end
# alone (the rest follow in ./... order; go test runs each package once).
SLOW_PACKAGES := ./examples/etcd-opstask ./backupstore ./examples/backup-entry ./lifecycle ./examples/fdb-lock ./examples/statefulset-pvc ./examples/aerospike-gc ./backupstore/share/pool ./testenv
test: testenv
	GOFLAGS='$(TEST_GOFLAGS)' $(MAKE) --no-print-directory -j $(CHECK_JOBS) --output-sync=target $(QUICK_CHECKS)
	GOFLAGS='$(TEST_GOFLAGS)' hack/beside.sh '$(MAKE) --no-print-directory -j 2 --output-sync=target $(SLOW_CHECKS)' \
		env GROUNDSKEEPER_TESTENV_DATA=$(TESTENV_DATA) $(GO) test $(TEST_LDFLAGS) $(TEST_FLAGS) -skip '$(TEST_SKIP)' $(SLOW_PACKAGES) $(PACKAGES)

lint: fmt-check tidy-check versions-check vet staticcheck size-check deps-check api-check vulncheck

# The library alone, at the oldest versions it supports: build, vet and the
# unit tests (-short skips every test that needs a real component; those run
# in make test at the newest versions). go test's cache serves a package
# whose inputs did not change, as in make test.
oldest:
	GOWORK=off $(GO) build ./...
	GOWORK=off $(GO) vet ./...
	GOWORK=off $(GO) test -short ./...

# The root module's documentation as pkg.go.dev will render it, by pkgsite
# on a loopback port: every public package's page renders, with its
# overview, its examples and the license detected as Apache-2.0.
docs:
	hack/pkgsite.sh check

# The tests of the tools under internal/tools (modules of their own, which
# ./... does not reach).
TOOL_TESTS := apicheck depsbudget vulncheck
tools-test:
	@for t in $(TOOL_TESTS); do (cd internal/tools/$$t && GOWORK=off $(GO) test .) || exit 1; done

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Every go.mod and go.sum must already be what go mod tidy makes them.
tidy-check:
	@for m in $(MODULES); do echo "go mod tidy -diff ($$m)"; (cd $$m && GOWORK=off $(GO) mod tidy -diff) || exit 1; done

# The library's go.mod requires the oldest supported versions and the
# workspace (examples, integration tests) selects the newest.
versions-check:
	@check() { got=$$($(GO) list -m -f '{{.Version}}' $$2); \
	  [ "$$got" = "$$3" ] || { echo "versions-check: $$1: $$2 is $$got, want $$3 (see OLDEST_*/NEWEST_* in the Makefile)"; exit 1; }; }; \
	got=$$(GOWORK=off $(GO) mod edit -json | sed -n 's/^\t"Go": "\(.*\)",$$/\1/p'); \
	[ "$$got" = "$(OLDEST_GO)" ] || { echo "versions-check: go.mod: go $$got, want $(OLDEST_GO)"; exit 1; }; \
	for p in k8s.io/api k8s.io/apimachinery k8s.io/client-go; do \
	  GOWORK=off check library $$p $(OLDEST_K8S); check workspace $$p $(NEWEST_K8S); done; \
	GOWORK=off check library sigs.k8s.io/controller-runtime $(OLDEST_CR); \
	check workspace sigs.k8s.io/controller-runtime $(NEWEST_CR); \
	echo "versions-check: library at k8s.io $(OLDEST_K8S), controller-runtime $(OLDEST_CR), go $(OLDEST_GO); workspace at $(NEWEST_K8S), $(NEWEST_CR)"

vet:
	$(GO) vet $(PACKAGES)

staticcheck:
	@[ -x $(BIN)/staticcheck ] || hack/testenv.sh staticcheck
	$(BIN)/staticcheck $(PACKAGES)

# What go get downloads: no tracked file over 1 MiB unless allowed in
# hack/large-files.allow, and the module zip of HEAD, built as the Go module
# proxy builds it, under its budget (internal/tools/modsize).
size-check:
	cd internal/tools/modsize && GOWORK=off $(GO) run . -C ../../.. -budget 2MiB -allow hack/large-files.allow

# What each public package costs a user who imports it: the modules (and
# packages) of its import closure, the library alone at its go.mod's
# versions, compared with hack/deps-budget.txt (internal/tools/depsbudget).
# It fails, naming the package, the modules and the import that brings
# them, when a package pulls in more or less than its budget; make
# deps-budget rewrites the budget when the change is intended.
deps-check:
	cd internal/tools/depsbudget && GOWORK=off $(GO) run . -C ../../..

# The exported API of every public package, one declaration a line, as
# recorded in api/groundskeeper.txt and api/fdblock.txt
# (internal/tools/apicheck): api-check fails on any difference, naming
# removals and changed signatures as incompatible; make api records the
# API as it is (see RELEASING.md for what a release may change).
api-check:
	cd internal/tools/apicheck && GOWORK=off $(GO) run . -C ../../..
	cd internal/tools/apicheck && GOWORK=off $(GO) run . -C ../../../locking/fdblock -file ../../api/fdblock.txt

api:
	cd internal/tools/apicheck && GOWORK=off $(GO) run . -C ../../.. -write
	cd internal/tools/apicheck && GOWORK=off $(GO) run . -C ../../../locking/fdblock -file ../../api/fdblock.txt -write

deps-budget:
	cd internal/tools/depsbudget && GOWORK=off $(GO) run . -C ../../.. -write

# Known vulnerabilities, by govulncheck over the library (those its code
# calls), the examples and the kubectl plugin (those in a package they
# import, called or not: stricter, and seconds instead of minutes for
# modules that ship no library), each module alone at the versions its
# go.mod selects, against the Go vulnerability database of the golang.org/x/vulndb
# version pinned in hack/testenv.sh (no network needed once it is built).
# Fails on each one not in hack/vulncheck.allow, and on each line there that
# no longer matches one. Each scan's result is kept in VULNCHECK_CACHE
# (beside the test components, outside the clone) under a hash of all it
# reads, so that an unchanged module is not scanned again: the call graph of
# the library costs minutes of CPU (2½ CPU-minutes of the 50 of a make
# test on 2 cores).
# VULNCHECK_CACHE= scans everything.
VULNCHECK_CACHE ?= $(or $(GROUNDSKEEPER_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/groundskeeper)/vulncheck
vulncheck:
	@hack/testenv.sh vulndb
	cd internal/tools/vulncheck && GOWORK=off $(GO) run . -C ../../.. -db .cache/vulndb -allow hack/vulncheck.allow -cache '$(VULNCHECK_CACHE)' . examples:package cmd/kubectl-groundskeeper:package

bench: testenv
	mkdir -p $(BENCH_OUT)
	set -o pipefail; BENCH_OUT=$(BENCH_OUT) $(GO) test $(BENCH_FLAGS) $(PACKAGES) | tee $(BENCH_OUT)/bench.txt
	$(MAKE) bench-charts

bench-charts:
	cd internal/tools/benchchart && GOWORK=off $(GO) run . -in $(BENCH_OUT) -out $(BENCH_OUT)

# The chaos runs (examples/internal/chaos): every example's TestChaos* but the
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
chaos: testenv property checkers soak
	GROUNDSKEEPER_TESTENV_DATA=$(TESTENV_DATA) CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_SEED=$(CHAOS_SEED) \
		$(GO) test -race -count=1 -v -p $(CHAOS_PARALLEL) -run '^TestChaos' -skip 'PlantedBugs' -timeout $(CHAOS_TIMEOUT) $(CHAOS_PACKAGES)

# The ownership property tests of shared buckets and backup collection
# (backupstore/share and its subpackages, TestProperty*) on fresh seeds for
# PROPERTY_DURATION each (default 10m); make test runs them on a fixed set
# of seeds, and PROPERTY_SEED replays one.
PROPERTY_DURATION ?= 10m
property:
	PROPERTY_DURATION=$(PROPERTY_DURATION) PROPERTY_SEED=$(PROPERTY_SEED) \
		$(GO) test -count=1 -v -run '^TestProperty' -timeout 0 ./backupstore/share/...

# The library's long tests at the sizes that show they hold at scale
# (internal/soak): make test runs them smaller.
soak: testenv
	GROUNDSKEEPER_TESTENV_DATA=$(TESTENV_DATA) GROUNDSKEEPER_SOAK=1 \
		$(GO) test -race -count=1 -timeout 60m -skip 'TestChaos' ./backupstore/... ./examples/backup-entry/

checkers: testenv
	GROUNDSKEEPER_TESTENV_DATA=$(TESTENV_DATA) $(GO) test -race -count=1 -v -run '^TestChaosCheckerCatchesPlantedBugs$$' -timeout 45m $(CHAOS_PACKAGES)

chaos-short: testenv
	GROUNDSKEEPER_TESTENV_DATA=$(TESTENV_DATA) CHAOS_SEED=$(CHAOS_SEED) \
		$(GO) test -race -count=1 -v -run '^TestChaos' -skip 'PlantedBugs' -timeout 20m $(CHAOS_PACKAGES)
