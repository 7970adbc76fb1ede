# Deployment targets: container images and the local kind flow.
# Included by the top-level Makefile; see the README, section Deployment.
#
#   make image                         build the three images (tag $(IMAGE_TAG))
#   make kind-up kind-load kind-deploy kind-e2e
#   make kind-down
#
# Every kubectl call names the kind cluster's context, so these targets never
# touch another cluster.

DOCKER          ?= docker
KIND            ?= kind
KUBECTL         ?= kubectl
KIND_CLUSTER    ?= mcp-extproc
KIND_NODE_IMAGE ?=
KIND_NAMESPACE  ?= mcp-extproc
KIND_CONTEXT    := kind-$(KIND_CLUSTER)
IMAGE_TAG       ?= dev
# Stamped into the binaries and the images' OCI labels (see the Dockerfile).
IMAGE_VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# Load phase of kind-e2e: concurrent MCP sessions and how long they run; the
# example plugin is restarted KIND_E2E_RESTART_AFTER seconds into the load.
KIND_E2E_CONCURRENCY   ?= 8
KIND_E2E_DURATION      ?= 60s
KIND_E2E_RESTART_AFTER ?= 15

# Dockerfile target -> image name. manifests/ and the kind overlay use the
# same names with the tag dev.
DEPLOY_IMAGE_extproc        := mcp-extproc
DEPLOY_IMAGE_example-plugin := mcp-extproc-example-plugin
DEPLOY_IMAGE_mcp-echo       := mcp-echo
DEPLOY_TARGETS              := extproc example-plugin mcp-echo

.PHONY: image $(addprefix image-,$(DEPLOY_TARGETS)) \
	kind-up kind-load kind-deploy kind-e2e kind-down kind-logs kind-all

image: $(addprefix image-,$(DEPLOY_TARGETS)) ## docker build the three images (tag IMAGE_TAG)

$(addprefix image-,$(DEPLOY_TARGETS)): image-%:
	$(DOCKER) build --build-arg VERSION=$(IMAGE_VERSION) --build-arg REVISION=$(IMAGE_REVISION) \
		--target $* -t $(DEPLOY_IMAGE_$*):$(IMAGE_TAG) .

kind-up: ## create the kind cluster
	@if $(KIND) get clusters 2>/dev/null | grep -qx '$(KIND_CLUSTER)'; then \
		echo "kind cluster $(KIND_CLUSTER) already exists"; \
	else \
		$(KIND) create cluster --name $(KIND_CLUSTER) --config hack/kind/cluster.yaml \
			$(if $(KIND_NODE_IMAGE),--image $(KIND_NODE_IMAGE)) --wait 120s; \
	fi

# The kind overlay runs the :dev images with imagePullPolicy Never.
kind-load: IMAGE_TAG = dev
kind-load: image ## build the :dev images and load them into kind
	$(KIND) load docker-image --name $(KIND_CLUSTER) \
		$(foreach t,$(DEPLOY_TARGETS),$(DEPLOY_IMAGE_$(t)):dev)

kind-deploy: ## apply manifests/overlays/kind, wait for the rollouts
	$(KUBECTL) --context $(KIND_CONTEXT) apply -k manifests/overlays/kind
	$(KUBECTL) --context $(KIND_CONTEXT) -n $(KIND_NAMESPACE) rollout status deployment/example-plugin --timeout=180s
	$(KUBECTL) --context $(KIND_CONTEXT) -n $(KIND_NAMESPACE) rollout status deployment/mcp-server --timeout=180s

# Scripted session, then load with a plugin restart in the middle, through a
# kubectl port-forward to the Envoy Service. Fails on any failed MCP call.
kind-e2e: ## scripted session and load with a plugin restart, through kind
	KUBECTL='$(KUBECTL)' KUBE_CONTEXT='$(KIND_CONTEXT)' NAMESPACE='$(KIND_NAMESPACE)' \
	CONCURRENCY='$(KIND_E2E_CONCURRENCY)' DURATION='$(KIND_E2E_DURATION)' \
	RESTART_AFTER='$(KIND_E2E_RESTART_AFTER)' \
		sh hack/kind/e2e.sh

kind-logs: ## recent logs of every container
	$(KUBECTL) --context $(KIND_CONTEXT) -n $(KIND_NAMESPACE) logs deployment/mcp-server --all-containers --prefix --tail=200
	$(KUBECTL) --context $(KIND_CONTEXT) -n $(KIND_NAMESPACE) logs deployment/example-plugin --prefix --tail=200

# The whole flow, in order even under make -j.
kind-all: ## kind-up, kind-load, kind-deploy, kind-e2e in order
	$(MAKE) --no-print-directory kind-up
	$(MAKE) --no-print-directory kind-load
	$(MAKE) --no-print-directory kind-deploy
	$(MAKE) --no-print-directory kind-e2e

kind-down: ## delete the kind cluster
	$(KIND) delete cluster --name $(KIND_CLUSTER)
