# rtcd build and test entry points. README.md names the two set-up commands:
# `make run` and `make test`. .ci/run calls `make test`.

GO ?= go
TEST_TIMEOUT ?= 20m

# Go files checked by gofmt: every .go file except caches, data and build output.
GOFILES = $(shell find . -name '*.go' -not -path './.cache/*' -not -path './data/*' -not -path './bin/*' -not -path '*/testdata/*' -not -path './node_modules/*')

NPM ?= npm

.PHONY: run build test bench lint fmt vet web web-deps web-check sdk-web-test sdk-node-check sdk-node-test

# RUN_FLAGS are extra `rtcd serve` flags for `make run`. Every setting can
# also come from its RTCD_ variable (RTCD_DATA_DIR, RTCD_LISTEN, ...: see
# docs/configuration.md); make passes the environment through untouched.
RUN_FLAGS ?=

## run: start rtcd on embedded defaults (Pebble in ./data, bootstrapped on first start),
## or on the RTCD_ variables set and RUN_FLAGS, after rebuilding the web dashboard
## when npm is there (the committed build otherwise)
run:
	@if command -v $(NPM) >/dev/null 2>&1; then $(MAKE) --no-print-directory web; \
	else echo "npm not found: serving the committed dashboard build (web/dashboard/dist)"; fi
	@$(GO) run ./cmd/rtcd serve $(RUN_FLAGS)

# The web code is one npm workspace (package.json at the root, its lock
# committed). npm ci runs again only when a manifest or the lock changes.
web-deps: node_modules/.package-lock.json
node_modules/.package-lock.json: package.json package-lock.json web/dashboard/package.json sdk/web/package.json sdk/node/package.json
	$(NPM) ci --no-audit --no-fund
	@touch $@

## web: type-check the dashboard (strict) and build it into web/dashboard/dist, which is committed
web: web-deps
	$(NPM) run --silent --workspace web/dashboard check
	$(NPM) run --silent --workspace web/dashboard build

## web-check: type-check the dashboard and the web SDK (sdk/web), and fail when a fresh
## build differs from the committed web/dashboard/dist
web-check: web-deps
	$(NPM) run --silent --workspace web/dashboard check
	$(NPM) run --silent --workspace sdk/web check
	@tmp="$$(mktemp -d)"; node web/dashboard/build.mjs "$$tmp" && \
	if ! diff -r web/dashboard/dist "$$tmp"; then \
		echo "web/dashboard/dist does not match its sources: run 'make web' and commit web/dashboard/dist"; rm -rf "$$tmp"; exit 1; \
	fi; rm -rf "$$tmp"

## build: build the rtcd binary into bin/rtcd
build:
	$(GO) build -o bin/rtcd ./cmd/rtcd

# SDK_MODULES are the SDKs: nested Go modules with their own versions
# (docs/sdks.md), tested against the real server like the service itself.
SDK_MODULES = $(sort $(dir $(wildcard sdk/*/go.mod)))

# MANY_PROCESS_PKGS start many processes each (the rtcd binary, NATS
# clusters, Chromium, child servers): they run one package at a time
# (-p 1), after the others, so that no two of them share the machine's
# cores and time out each other's waits. Their rtcd binaries are built
# without the race detector; the tests themselves run with it.
MANY_PROCESS_PKGS = rtcd/e2e rtcd/loadtest rtcd/persistence/jsstore rtcd/cluster

## test: gofmt check, go vet, the web build check, then every test with the race detector
## (the service, its browser tests in Chromium, the end-to-end suite again on a NATS
## JetStream cluster, and each SDK module), then the Node SDK's
test: fmt vet web-check
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(filter-out $(MANY_PROCESS_PKGS),$(shell $(GO) list ./...))
	$(GO) test -race -count=1 -p 1 -timeout $(TEST_TIMEOUT) $(MANY_PROCESS_PKGS)
	@echo "--- e2e on JetStream (E2E_STORE=jetstream: three NATS servers, docs/cluster.md)"
	E2E_STORE=jetstream $(GO) test -race -count=1 -p 1 -timeout $(TEST_TIMEOUT) ./e2e
	@set -e; for m in $(SDK_MODULES); do echo "--- $$m"; (cd $$m && $(GO) test -race -count=1 -p 1 -timeout $(TEST_TIMEOUT) ./...); done
	@$(MAKE) --no-print-directory sdk-web-test
	@$(MAKE) --no-print-directory sdk-node-test

## sdk-web-test: the web SDK's unit tests (node's test runner; its browser tests are in e2e)
sdk-web-test: web-deps
	@echo "--- sdk/web"
	$(NPM) run --silent --workspace sdk/web test

# The Node server SDK (sdk/node, docs/sdks.md) is a package of the npm
# workspace. Its checks regenerate the OpenAPI types it is compared with.
## sdk-node-check: the Node SDK's strict type-check (its types against docs/openapi.yaml too)
sdk-node-check: web-deps
	$(NPM) run --silent --workspace sdk/node check

## sdk-node-test: the Node SDK's tests (node's test runner) against an rtcd they build and start
sdk-node-test: web-deps
	@echo "--- sdk/node"
	$(NPM) run --silent --workspace sdk/node test

# SEEDS is how many seeds `make simulate` runs, from SEED on; SEEDS=1
# replays seed SEED and prints its trace.
SEEDS ?= 10000
SEED ?= 1

.PHONY: simulate

## simulate: the crash simulation (package sim, docs/testing.md) over SEEDS seeds from SEED, without
## the race detector (make test runs 200 seeds with it)
simulate:
	$(GO) test ./sim -run 'TestSimulate$$' -count=1 -timeout 0 -v -sim.seeds=$(SEEDS) -sim.seed=$(SEED)

## bench: a smoke run of every benchmark (100 iterations each)
bench:
	$(GO) test -run '^$$' -bench . -benchtime=100x ./...

## lint: gofmt check, go vet and the web and Node SDK type-checks
lint: fmt vet web-check sdk-node-check

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

.PHONY: loadtest loadtest-media-smoke

## loadtest: run the load test suite (go run ./loadtest $(LOADTEST_ARGS)); see loadtest/README.md
loadtest:
	$(GO) run ./loadtest $(LOADTEST_ARGS)

## loadtest-media-smoke: a short media scenario (WebRTC through the built binary's media node and the plain
## pion forwarder, about 30 s) so the scenario keeps working; its figures mean nothing on a CI machine
loadtest-media-smoke:
	$(GO) run ./loadtest -local -scenario media -duration 3s -media-rooms 1 -media-publishers 2 -media-subscribers 2 -quiet
