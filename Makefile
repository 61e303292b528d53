# memoryd: the two commands a fresh machine needs are `make demo` and `make test`.
GO ?= go
PKGS ?= ./...
FUZZTIME ?= 30s

.PHONY: demo test build services vet fuzz serve

## demo: start the local servers if needed, then run memoryd end to end on the defaults
demo: services
	$(GO) run ./cmd/memoryd demo

## test: vet and run every test with the race detector against the real servers
test: services vet
	$(GO) test -race -count=1 -timeout 8m $(PKGS)

## serve: run the service on the defaults
serve: services
	$(GO) run ./cmd/memoryd serve

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet $(PKGS)

build:
	CGO_ENABLED=0 $(GO) build -o bin/memoryd ./cmd/memoryd

services:
	@./scripts/services.sh

## fuzz: run each fuzz target for FUZZTIME (not part of `make test`)
fuzz:
	@for pkg in $$($(GO) list $(PKGS)); do \
		for fn in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$fn"; \
			$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done
