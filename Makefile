# mcp-extproc — the two commands a newcomer needs:
#   make demo   start a local stack and push MCP calls through the sidecar
#               (DEMO_FLAGS=-transports=mcp,grpc: the policy split over MCP and gRPC;
#               DEMO_FLAGS=-keep: keep the stack up until Ctrl-C)
#   make test   vet, format check, race-enabled tests (with the chart's checks:
#               the chart checker is built once per machine), the fuzz targets'
#               seed corpora as plain tests, allocation budgets
# Everything else is optional (`make help` lists it). Only Go (see go.mod)
# must be installed; the Makefile fetches the modules it needs.
#
# A target's "## text" is its line in `make help`.

GO       ?= go
BIN      := bin
CMDS     := extproc example-plugin mcp-echo e2e
# Fuzz budget per target. A count, not a duration: with a duration, Go's
# fuzzer can end a run that is still minimizing a new input with "context
# deadline exceeded", a false failure on a fresh cache (as in CI).
# `make test` does not fuzz: `go test` runs every fuzz target's seed corpus
# (testdata/fuzz and its f.Add inputs) as a plain test, race detector on,
# which is what a short run mostly checked; an instrumented run builds one
# more binary per target (most of a cold `make test` before, README, "What
# make test costs"). CI calls `make test-fuzz` (TEST_FUZZTIME per target)
# as a step of its own; `make fuzz` digs deeper with FUZZTIME (`make fuzz
# FUZZTIME=10m` by hand: a duration is fine there).
TEST_FUZZTIME ?= 5000x
FUZZTIME ?= 200000x
# Bound the minimization of each new input too (also a count).
FUZZMINIMIZE ?= 200x
# Fuzz targets of `make test-fuzz` and `make fuzz` (package:target): every parser that
# reads bytes from a client, a server or a plugin. Seed corpora live in each
# package's testdata/fuzz/; `make fuzz FUZZTIME=10m` digs deeper (a duration is fine by hand).
FUZZ_TARGETS := ./pkg/mcpmsg:FuzzParse ./pkg/sse:FuzzDecode ./pkg/processor:FuzzStreamedResponse ./pkg/processor:FuzzRequestBody ./pkg/processor:FuzzForeignResponses \
	./pkg/contentcoding:FuzzDecode ./pkg/config:FuzzParse ./pkg/config:FuzzExpand ./pkg/config:FuzzParseClaimPath \
	./pkg/pluginclient/mcpconn:FuzzParseInvokeReply ./pkg/pluginclient/mcpconn:FuzzReadSSEAnswer ./pkg/executor:FuzzCheckPayload ./pkg/pluginserver:FuzzInvoke \
	./pkg/attribution:FuzzOps ./pkg/attribution/redisstore:FuzzKeys ./pkg/mcpheaders:FuzzDecode ./pkg/mcpheaders:FuzzMirror \
	./pkg/logsafe:FuzzWriter ./pkg/logsafe:FuzzCap ./pkg/cpexpb:FuzzJSON ./pkg/mcplist:FuzzFilter ./pkg/rules:FuzzCheck ./pkg/processor:FuzzCodec ./pkg/structwire:FuzzParse \
	./pkg/builtin/jsonscan:FuzzRewrite ./pkg/builtin/pii:FuzzPrefilter ./pkg/builtin/secrets:FuzzGates ./pkg/mcpmsg:FuzzCanonicalID ./pkg/mcpmsg:FuzzScanValid ./pkg/toolpin:FuzzFingerprint ./pkg/audit:FuzzOCSF

# The plugin server on the official MCP TypeScript SDK that the tests run
# next to the Go ones (npm, pinned by its lockfile). Without node, its
# tests skip.
TSPLUGIN := internal/nodeplugin/tsplugin

.PHONY: all help build test vet fmt-check unit unit-race unit-static prebuild-static fuzz test-fuzz demo bench path-count deps node-deps clean

all: build

help: ## list the targets and what they do
	@echo "Targets:"
	@awk 'BEGIN { FS = ":[^#]*## " } /^[a-zA-Z][a-zA-Z0-9_-]*:[^=]*## / { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
	@echo "Variables: DEMO_FLAGS (-keep, -transports=...), BENCH_FLAGS (-markdown),"
	@echo "  FUZZTIME (make fuzz, default $(FUZZTIME)), TEST_FUZZTIME (make test-fuzz, default $(TEST_FUZZTIME)), IMAGE_TAG"

deps: ## download the Go modules
	$(GO) mod download

node-deps: ## npm ci the TypeScript SDK plugin server of the tests (skipped without node)
	@if ! command -v node >/dev/null 2>&1; then \
		echo "node not on PATH: skipping the TypeScript SDK plugin server tests"; \
	elif [ ! -f $(TSPLUGIN)/node_modules/.package-lock.json ] || \
		[ $(TSPLUGIN)/package-lock.json -nt $(TSPLUGIN)/node_modules/.package-lock.json ]; then \
		npm ci --no-audit --no-fund --prefix $(TSPLUGIN); \
	fi

# The one build command, shared with the Dockerfile through hack/build.sh.
build: deps ## static binaries in bin/, version and commit stamped
	@for c in $(CMDS); do ./hack/build.sh $$c $(BIN) || exit 1; done

test: deps node-deps fmt-check unit path-count ## what CI runs: gofmt, race tests with every vet check (seed corpora included), allocation budgets, the request path's files

# VET_CHECKS are every analyzer of go vet. go test runs them on every
# package it is given, those without a test file included (it compiles
# and vets them), from the test build's own compiles: a separate
# `go vet ./...` compiled every package once more, and a separate vet of
# the packages without tests recomputed the vet facts of all their
# dependencies (README "What make test costs").
VET_CHECKS = $(shell $(GO) tool vet help 2>/dev/null | awk '/^    [a-z]/ {print $$1}' | paste -sd, -)

# TEST_BUILD are the build flags of every compile make test runs: the race
# build, the race-free build of the static checks and budgets, and the chart
# checker (mk/chart.mk), which shares the race-free compiles of the standard library
# and of the Kubernetes modules with the deploy checks (hack/tools/go.mod).
# -trimpath: the build cache serves any clone, whatever its directory.
# -dwarf=false: no debug information, which no test reads (race reports
# and panics use the runtime's own symbol table); it is a tenth of the
# compile time and most of each test binary's link.
TEST_BUILD := -trimpath -gcflags=all=-dwarf=false

vet: ## go vet ./...
	$(GO) vet -trimpath ./...

fmt-check: ## fail if a file needs gofmt
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# STATIC_CHECKS are the packages that only read files (the deploy checks:
# manifests, envoy.yaml, the chart rendered by helm): they run without the
# race detector, which made internal/deploytest 83 s of make test (kustomize
# under race) and has no goroutine of the product to watch there.
STATIC_CHECKS := ./internal/deploytest

# BUDGETS are the tests that count allocations per exchange: the race
# detector allocates on its own, so they skip under -race and run here
# once more without it (pkg/processor/budget_test.go).
BUDGETS := ./pkg/processor

# unit runs the race half, then the race-free half. While the race half
# runs, the race-free half's builds (bin/chartcheck once per machine, then the
# compiles, vet and links of the deploy checks and budgets, running no test)
# go on beside it at the lowest CPU priority (nice 19): they take the CPU
# the race half leaves idle (its tests of restarts, timeouts and quiet
# periods mostly wait), and yield it when a test wants it. Run side by side
# at normal priority (make -j2 unit-race unit-static) they loaded both
# cores while the race half tested restarts and timeouts, and two such
# tests failed. The race-free half then finds its builds done and only
# runs its tests. A prebuild that fails prints its output and fails unit.
unit: ## every test, every vet check: the race detector on all but the static deploy checks; allocation budgets without it
	@mkdir -p $(BIN); \
	nice -n 19 $(MAKE) --no-print-directory prebuild-static >$(BIN)/prebuild.log 2>&1 & pre=$$!; \
	$(MAKE) --no-print-directory unit-race; rc=$$?; \
	if ! wait $$pre; then cat $(BIN)/prebuild.log; exit 1; fi; \
	[ $$rc -eq 0 ] || exit $$rc; \
	$(MAKE) --no-print-directory unit-static

# prebuild-static builds what unit-static runs (the same flags, so its
# go test finds every compile, vet and link in the build cache), running no
# test; bin/chartcheck first (its prerequisite, in mk/chart.mk: a
# prerequisite is expanded where the rule is read, and mk/*.mk is included
# at the end).
prebuild-static: ## the race-free half's builds without running a test (unit runs it beside the race tests)
	$(GO) test $(TEST_BUILD) -ldflags=-w -vet=$(VET_CHECKS) -count=1 -run '^$$' $(STATIC_CHECKS)
	$(GO) test $(TEST_BUILD) -ldflags=-w -vet=off -count=1 -run '^$$' $(BUDGETS)

unit-race: ## the race-enabled tests with every vet check (all packages but the static deploy checks)
	$(GO) test -race $(TEST_BUILD) -ldflags=-w -vet=$(VET_CHECKS) -count=1 -timeout 10m $$($(GO) list ./... | grep -v -x -F "$$($(GO) list $(STATIC_CHECKS))")

unit-static: ## the static deploy checks (with the chart checker) and the allocation budgets, race detector off
	$(GO) test $(TEST_BUILD) -ldflags=-w -vet=$(VET_CHECKS) -count=1 -timeout 10m $(STATIC_CHECKS)
	$(GO) test $(TEST_BUILD) -ldflags=-w -vet=off -count=1 -timeout 5m -run 'Budget' $(BUDGETS)

# run-fuzz runs every target of FUZZ_TARGETS for the budget $(1), two at a
# time with one worker each: most of a short run is starting it (building,
# gathering the baseline coverage), which one core does alone. Each run's
# output is printed whole when it ends; any failure fails the target.
define run-fuzz
	@printf '%s\n' $(FUZZ_TARGETS) | xargs -P 2 -I{} sh -c '\
		t={}; pkg=$${t%%:*}; name=$${t##*:}; \
		out=$$($(GO) test -run="^$$" -fuzz="^$$name$$" -fuzztime=$(1) -fuzzminimizetime=$(FUZZMINIMIZE) -parallel=1 -trimpath $$pkg 2>&1); rc=$$?; \
		printf "fuzz %s in %s for %s\n%s\n" "$$name" "$$pkg" "$(1)" "$$out"; exit $$rc'
endef

test-fuzz: ## every fuzz target for TEST_FUZZTIME: short instrumented runs (a CI step of its own)
	$(call run-fuzz,$(TEST_FUZZTIME))

fuzz: ## every fuzz target for FUZZTIME: deeper than make test
	$(call run-fuzz,$(FUZZTIME))

demo: deps node-deps ## the whole stack on loopback, a scripted MCP session through it
	$(GO) run ./cmd/demo $(DEMO_FLAGS)

# PATH_PROCESSOR_FILES bounds the files of pkg/processor one tools/call
# runs in (make path-count fails above it; make test runs it).
PATH_PROCESSOR_FILES = 8

path-count: ## list by file the code one tools/call runs (docs/architecture.md, "The path of one tools/call"); fail above PATH_PROCESSOR_FILES processor files
	$(GO) run ./hack/pathcount -max-processor-files $(PATH_PROCESSOR_FILES) -- $(TEST_BUILD) -ldflags=-w -vet=off

# BENCH_FLAGS=-markdown prints the tables of docs/benchmarks.md.
bench: deps node-deps ## benchmarks against a do-nothing ext_proc server (docs/benchmarks.md)
	$(GO) run ./cmd/bench $(BENCH_FLAGS)

clean: ## remove bin/
	rm -rf $(BIN)

-include mk/*.mk
