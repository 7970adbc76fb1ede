# The Helm chart (charts/mcp-extproc). Included by the top-level Makefile.
#
#   make helm          bin/helm (built once per machine; again when hack/tools/go.sum changes)
#   make chart-lint    helm lint and helm template of both shapes, by hand
#   make chart-files   copy into the chart the files it ships from elsewhere
#
# `make test` builds bin/helm while the race tests run (at nice 19, in the
# CPU they leave idle), then the static
# deploy checks: internal/deploytest lints and renders the chart with it and
# runs the deploy checks on the objects (without bin/helm those tests skip,
# saying so).
#
# helm comes from the Go module proxy through its own module, hack/tools, so
# neither helm nor its dependencies enter the product's go.mod. A build with
# an empty Go build cache costs about 4.5 minutes of CPU (262 s measured
# on 2026-12-02; 3.9 minutes of wall time on two busy shared cores); with a warm build cache it is a
# 4-second link. hack/tools/go.mod requires the product's versions of the
# modules both use (k8s.io/api and apimachinery, kustomize, protobuf,
# golang.org/x/...), and helm is compiled with make test's TEST_BUILD flags:
# the race-free deploy checks then reuse helm's compiles of those packages
# instead of compiling them again. When go.mod moves one of them, move it in
# hack/tools too (`go get module@version` there), or the sharing is lost
# (nothing breaks; the cold make test is slower).
# So it is built once per machine: into HELM_STORE, under a
# name that is the hash of hack/tools/go.sum (the helm version and its
# dependencies), and copied to bin/helm; another clone, or this one after
# `make clean`, copies it again. HELM_STORE= (empty) builds into bin/ only.

HELM         := $(BIN)/helm
HELM_STORE   ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/mcp-extproc
HELM_SUM     := $(shell sha256sum hack/tools/go.sum 2>/dev/null | cut -c1-16)
HELM_KUBEVER := 1.33.0
CHART        := charts/mcp-extproc

.PHONY: helm chart-lint chart-files

helm: $(HELM) ## bin/helm from hack/tools (built once per machine; again when hack/tools/go.sum changes)

$(HELM): hack/tools/go.mod hack/tools/go.sum
	@mkdir -p $(BIN)
	@stored=$(HELM_STORE)/helm-$(HELM_SUM); \
	if [ -n "$(HELM_STORE)" ] && [ -n "$(HELM_SUM)" ] && [ -x "$$stored" ]; then \
		echo "$(HELM): copied from $$stored (built before on this machine)"; \
		cp "$$stored" $(HELM); \
	else \
		echo "building $(HELM) from hack/tools (once per machine)"; \
		(cd hack/tools && $(GO) build $(TEST_BUILD) -ldflags='-s -w' -o ../../$(HELM) helm.sh/helm/v3/cmd/helm) || exit 1; \
		if [ -n "$(HELM_STORE)" ] && [ -n "$(HELM_SUM)" ]; then \
			mkdir -p $(HELM_STORE) && cp $(HELM) "$$stored.tmp" && mv "$$stored.tmp" "$$stored"; \
		fi; \
	fi

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

# The static deploy checks need bin/helm to check the chart (make test
# builds it while the race tests run: the Makefile's unit).
unit-static: $(HELM)
