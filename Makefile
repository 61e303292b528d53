# memoryd: the two commands a fresh machine needs are `make demo` and `make test`.
GO ?= go
# -trimpath keys the build cache by module path, not by the checkout's
# directory: a clean clone elsewhere (CI's) reuses what an earlier build
# compiled instead of compiling every package again (100 s before the
# first test in a fresh clone on these 2-core machines; 39 s with it). The
# GOFLAGS of `go env` (a machine's -buildvcs=false) are kept.
# `make demo` and `make serve` run memoryd with GOFLAGS_GO, the go command's
# own GOFLAGS without -trimpath: -trimpath keys every package, the standard
# library's too, apart in the build cache, and the README's next commands
# are plain `go run ./cmd/memoryd ...`, whose first run after a -trimpath
# demo compiled everything again (4m14s after the demo's 6m33s on a fresh
# 2-core machine, walk9 2026-12-05).
GOFLAGS_GO := $(strip $(shell $(GO) env GOFLAGS))
export GOFLAGS := $(strip $(GOFLAGS_GO) -trimpath)
PKGS ?= ./...
# TESTPKGS puts the longest packages first, longest first, when every
# package runs: go test starts packages in the order given (-p 2 on these
# machines), so the long ones share the cores with the short ones from the
# start instead of running alone at the end (a run at 8m04s of tests had
# worker, 176 s, start after 5 minutes and end last). Their times, from
# a run of 11m25s of tests on 2026-12-06 (cold build, the machine to
# itself): worker 207 s, systest 203 s, store 139 s, internal/app 105 s,
# enricher 100 s, cmd/memoryd 82 s, proxy 48 s; the other 16 packages
# under 45 s each (scripts/testprogress, 44 s there on the cold cache, is
# about 5 s since its fixture reuses the suite's build).
# TESTTIMEOUT is go test's -timeout, a package's panic on a hang, not a
# speed check: worker, 277 s in that run, took 10m21s beside other loads
# (load average 18-22 on 2 cores), which the 8m it was would have failed.
TESTTIMEOUT ?= 20m
TESTFLAGS = -race -count=1 -timeout $(TESTTIMEOUT)
LONGPKGS = ./worker/ ./systest/ ./store/ ./internal/app/ ./enricher/ ./cmd/memoryd/ ./proxy/
TESTPKGS = $(if $(filter ./...,$(PKGS)),$(LONGPKGS) ./...,$(PKGS))
FUZZTIME ?= 30s

.PHONY: demo test systest toolstest build services testservices testdeps vet tools fuzz serve

## demo: start the local servers if needed, then run memoryd end to end on the defaults
demo: services
	GOFLAGS='$(GOFLAGS_GO)' $(GO) run ./cmd/memoryd demo

## test: vet, build the tools, and run every test with the race detector against
## the real servers, printing each package as it finishes (scripts/testprogress);
## exit status is go test's. go test's own vet is off: a subset of what `vet`
## has just checked, done again for every test package (13 % of the machine's
## CPU while the tests ran after a change to store/, perf, 2026-12-05)
test: testservices testdeps vet tools
	$(GO) run ./scripts/testdb
	$(GO) run ./scripts/testnats
	$(GO) run ./scripts/testprogress $(TESTFLAGS) -vet=off $(TESTPKGS)

## toolstest: the tools module's tests, on the test servers: memeval's
## cross-validation must rank every question as enrich does, and its document
## set must name sections as the chunker titles them. Run it after changing
## enricher, store's search, ranking or chunker: outside any run they went stale
## twice unseen (2026-12-04). Not in `make test`: it adds a minute and a quarter
## to a run already near 10 minutes on these 2 cores, and beside it memeval's
## pools (30 connections) would crowd the tests' Postgres.
toolstest: testservices
	cd tools && MEMEVAL_DATABASE_URL="$${MEMEVAL_DATABASE_URL:-$$MEMORYD_TEST_DATABASE_URL}" \
		MEMEVAL_NATS_URL="$${MEMEVAL_NATS_URL:-$$MEMORYD_TEST_NATS_URL}" $(GO) test -count=1 -timeout $(TESTTIMEOUT) ./...

## systest: only the system tests (real memoryd processes, fault injection, the documented commands)
systest: testservices testdeps
	$(GO) run ./scripts/testdb
	$(GO) run ./scripts/testnats
	$(GO) run ./scripts/testprogress $(TESTFLAGS) ./systest/

## serve: run the service on the defaults
serve: services
	GOFLAGS='$(GOFLAGS_GO)' $(GO) run ./cmd/memoryd serve

## vet: gofmt and go vet; works in a source archive without .git (find, never stdin)
GOFMT_L = find . -path './.*' -prune -o -path ./vendor -prune -o -name '*.go' -type f -exec gofmt -l {} +
vet:
	@unformatted="$$($(GOFMT_L))"; test -z "$$unformatted" || { echo "gofmt needed:"; echo "$$unformatted"; exit 1; }
	$(GO) vet $(PKGS)

## tools: vet and build the measurement commands (membench, memeval, ingestcpu). They are a
## module of their own (tools/go.mod), so that SQLite and errgroup stay out of the
## service's build, `go vet ./...` and `go test ./...`; this is their step.
tools:
	cd tools && $(GO) vet ./... && $(GO) build ./...

build:
	CGO_ENABLED=0 $(GO) build -o bin/memoryd ./cmd/memoryd

services:
	@./scripts/services.sh

## testservices: the same for the servers the tests use (MEMORYD_TEST_DATABASE_URL, MEMORYD_TEST_NATS_URL)
testservices:
	@./scripts/services.sh test

## testdeps: Node.js/npm and libnats-dev, for the tests' Node.js and C clients (scripts/testdeps.sh)
testdeps:
	@./scripts/testdeps.sh

## fuzz: run each fuzz target for FUZZTIME (not part of `make test`)
fuzz:
	@for pkg in $$($(GO) list $(PKGS)); do \
		for fn in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$fn"; \
			$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done
