# rtcd build and test entry points. README.md names the two set-up commands:
# `make run` and `make test`. .ci/run calls `make test`.

GO ?= go
DATA_DIR ?= ./data
TEST_TIMEOUT ?= 20m

# Go files checked by gofmt: every .go file except caches, data and build output.
GOFILES = $(shell find . -name '*.go' -not -path './.cache/*' -not -path './data/*' -not -path './bin/*' -not -path '*/testdata/*')

.PHONY: run build test bench lint fmt vet

## run: start rtcd on embedded defaults (Pebble in ./data, bootstrapped on first start)
run:
	@$(GO) run ./cmd/rtcd serve --data-dir $(DATA_DIR)

## build: build the rtcd binary into bin/rtcd
build:
	$(GO) build -o bin/rtcd ./cmd/rtcd

# SDK_MODULES are the SDKs: nested Go modules with their own versions
# (docs/sdks.md), tested against the real server like the service itself.
SDK_MODULES = $(sort $(dir $(wildcard sdk/*/go.mod)))

## test: gofmt check, go vet, then every test with the race detector (the service and each SDK module)
test: fmt vet
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	@set -e; for m in $(SDK_MODULES); do echo "--- $$m"; (cd $$m && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...); done

## bench: a smoke run of every benchmark (100 iterations each)
bench:
	$(GO) test -run '^$$' -bench . -benchtime=100x ./...

## lint: gofmt check and go vet
lint: fmt vet

## fmt: fail when a Go file is not gofmt-formatted
fmt:
	@out="$$(gofmt -l $(GOFILES))"; \
	if [ -n "$$out" ]; then echo "gofmt would change these files (run gofmt -w):"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	@set -e; for m in $(SDK_MODULES); do (cd $$m && $(GO) vet ./...); done

# LOADTEST_ARGS are the flags of `make loadtest` (loadtest/README.md lists
# every flag). The default starts a local rtcd on a temporary data dir,
# runs the connect scenario against it and the baseline, and stops it.
LOADTEST_ARGS ?= -local -scenario connect -duration 10s -concurrency 64 -with-baseline

.PHONY: loadtest

## loadtest: run the load test suite (go run ./loadtest $(LOADTEST_ARGS)); see loadtest/README.md
loadtest:
	$(GO) run ./loadtest $(LOADTEST_ARGS)
