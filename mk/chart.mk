# The Helm chart (charts/mcp-extproc). Included by the top-level Makefile.
#
#   make helm          bin/helm (built once per machine; again when hack/tools/go.sum changes)
#   make chart-lint    helm lint and helm template of both shapes, by hand
#   make chart-files   copy into the chart the files it ships from elsewhere
#
# make test checks the chart with bin/chartcheck (hack/tools/chartcheck):
# helm's own library packages (chart loading, values and their schema, the
# template engine, the linter) behind `helm lint --strict` and `helm
# template`'s command lines, without the rest of the helm command (cluster
# client, registries, repositories, plugins): 528 packages to compile
# instead of helm's 963. internal/deploytest lints and renders the chart
# with it and runs the deploy checks on the objects (without it those tests
# skip, saying so). make test builds it while the race tests run (at nice
# 19, in the CPU they leave idle: the Makefile's unit).
#
# Both come from the Go module proxy through their own module, hack/tools,
# so neither helm nor its dependencies enter the product's go.mod.
# hack/tools/go.mod requires the product's versions of the modules both use
# (k8s.io/api and apimachinery, kustomize, protobuf, golang.org/x/...), and
# the tools are compiled with make test's TEST_BUILD flags: the race-free
# deploy checks then reuse their compiles of those packages instead of
# compiling them again. When go.mod moves one of them, move it in hack/tools
# too (`go get module@version` there), or the sharing is lost (nothing
# breaks; the cold make test is slower). helm from an empty Go build cache
# costs about 4.5 minutes of CPU (262 s measured on 2026-12-02); with a warm
# cache either is a few seconds' link.
#
# Each is built once per machine: into TOOL_STORE, under a name that is the
# hash of what it is built from (hack/tools/go.sum, and chartcheck's source),
# and copied to bin/; another clone, or this one after `make clean`, copies
# it again. TOOL_STORE= (empty) builds into bin/ only.

HELM         := $(BIN)/helm
CHARTCHECK   := $(BIN)/chartcheck
TOOL_STORE   ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/mcp-extproc
HELM_SUM     := $(shell cat hack/tools/go.sum 2>/dev/null | sha256sum | cut -c1-16)
CHECK_SUM    := $(shell cat hack/tools/go.sum hack/tools/chartcheck/*.go 2>/dev/null | sha256sum | cut -c1-16)
HELM_KUBEVER := 1.33.0
CHART        := charts/mcp-extproc

.PHONY: helm chart-lint chart-files

# stored-build builds $(1) from the hack/tools package $(2), or copies it
# from TOOL_STORE under the name $(3) when this machine built it before.
define stored-build
	@mkdir -p $(BIN)
	@stored=$(TOOL_STORE)/$(3); \
	if [ -n "$(TOOL_STORE)" ] && [ -x "$$stored" ]; then \
		echo "$(1): copied from $$stored (built before on this machine)"; \
		cp "$$stored" $(1); \
	else \
		echo "building $(1) from hack/tools (once per machine)"; \
		(cd hack/tools && $(GO) build $(TEST_BUILD) -ldflags='-s -w' -o ../../$(1) $(2)) || exit 1; \
		if [ -n "$(TOOL_STORE)" ]; then \
			mkdir -p $(TOOL_STORE) && cp $(1) "$$stored.tmp" && mv "$$stored.tmp" "$$stored"; \
		fi; \
	fi
endef

helm: $(HELM) ## bin/helm from hack/tools (built once per machine; again when hack/tools/go.sum changes)

$(HELM): hack/tools/go.mod hack/tools/go.sum
	$(call stored-build,$(HELM),helm.sh/helm/v3/cmd/helm,helm-$(HELM_SUM))

$(CHARTCHECK): hack/tools/go.mod hack/tools/go.sum $(wildcard hack/tools/chartcheck/*.go)
	$(call stored-build,$(CHARTCHECK),./chartcheck,chartcheck-$(CHECK_SUM))

chart-lint: $(HELM) ## helm lint and helm template of both chart shapes
	$(HELM) lint --strict --kube-version $(HELM_KUBEVER) $(CHART)
	$(HELM) template mcp-extproc $(CHART) --kube-version $(HELM_KUBEVER) >/dev/null
	$(HELM) template mcp-extproc $(CHART) --kube-version $(HELM_KUBEVER) \
		--values internal/deploytest/testdata/helm/gateway-full.yaml >/dev/null
	@echo "chart: lint and both shapes render"

# The chart cannot read files outside its directory: it ships copies, and
# internal/deploytest fails when one drifts.
chart-files: ## copy into the chart the files it ships from envoy/ and manifests/
	cp envoy/envoy.yaml $(CHART)/files/envoy.yaml
	cp manifests/alerts/prometheusrule.yaml $(CHART)/files/prometheusrule.yaml
	cp manifests/observability/grafana-dashboard.json $(CHART)/files/grafana-dashboard.json

# The static deploy checks need bin/chartcheck to check the chart (make
# test builds it while the race tests run: the Makefile's unit).
unit-static: $(CHARTCHECK)
prebuild-static: $(CHARTCHECK)
