# mcp-extproc — the two commands a newcomer needs:
#   make demo   start a local stack and push MCP calls through the sidecar
#               (DEMO_FLAGS=-transports=mcp,grpc: the policy split over MCP and gRPC)
#   make test   vet, format check, race-enabled tests, short fuzz runs
# Everything else is optional. Only Go (see go.mod) must be installed; the
# Makefile fetches the modules it needs.

GO       ?= go
BIN      := bin
CMDS     := extproc example-plugin mcp-echo e2e
# Fuzz budget per target. A count, not a duration: with a duration, Go's
# fuzzer can end a run that is still minimizing a new input with "context
# deadline exceeded", a false failure on a fresh cache (as in CI).
FUZZTIME ?= 20000x
# Bound the minimization of each new input too (also a count).
FUZZMINIMIZE ?= 200x
# Fuzz targets run briefly by `make test` (package:target): every parser that
# reads bytes from a client, a server or a plugin. Seed corpora live in each
# package's testdata/fuzz/; `make fuzz FUZZTIME=10m` digs deeper (a duration is fine by hand).
FUZZ_TARGETS := ./pkg/mcpmsg:FuzzParse ./pkg/sse:FuzzDecode ./pkg/processor:FuzzStreamedResponse ./pkg/processor:FuzzRequestBody ./pkg/processor:FuzzForeignResponses \
	./pkg/contentcoding:FuzzDecode ./pkg/config:FuzzParse ./pkg/config:FuzzExpand ./pkg/config:FuzzParseClaimPath \
	./pkg/pluginclient/mcpconn:FuzzParseInvokeReply ./pkg/executor:FuzzCheckPayload ./pkg/pluginserver:FuzzInvoke \
	./pkg/attribution:FuzzOps ./pkg/mcpheaders:FuzzDecode ./pkg/mcpheaders:FuzzMirror \
	./pkg/logsafe:FuzzWriter ./pkg/logsafe:FuzzCap ./pkg/cpexpb:FuzzJSON

# The plugin server on the official MCP TypeScript SDK that the tests run
# next to the Go ones (npm, pinned by its lockfile). Without node, its
# tests skip.
TSPLUGIN := internal/nodeplugin/tsplugin

.PHONY: all build test vet fmt-check unit fuzz demo bench deps node-deps clean

all: build

deps:
	$(GO) mod download

node-deps:
	@if ! command -v node >/dev/null 2>&1; then \
		echo "node not on PATH: skipping the TypeScript SDK plugin server tests"; \
	elif [ ! -f $(TSPLUGIN)/node_modules/.package-lock.json ] || \
		[ $(TSPLUGIN)/package-lock.json -nt $(TSPLUGIN)/node_modules/.package-lock.json ]; then \
		npm ci --no-audit --no-fund --prefix $(TSPLUGIN); \
	fi

# The one build command, shared with the Dockerfile through hack/build.sh.
build: deps
	@for c in $(CMDS); do ./hack/build.sh $$c $(BIN) || exit 1; done

test: deps node-deps vet fmt-check unit fuzz

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

unit:
	$(GO) test -race -count=1 -timeout 10m ./...

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) $$pkg || exit 1; \
	done

demo: deps node-deps
	$(GO) run ./cmd/demo $(DEMO_FLAGS)

# BENCH_FLAGS=-markdown prints the tables of docs/benchmarks.md.
bench: deps node-deps
	$(GO) run ./cmd/bench $(BENCH_FLAGS)

clean:
	rm -rf $(BIN)

-include mk/*.mk
