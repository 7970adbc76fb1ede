package deploytest

import (
	"strings"
	"testing"
)

// brokenCase breaks one file of a snapshot and names what the checks must
// then report.
type brokenCase struct {
	name  string
	file  string
	old   string // replaced once in file; must occur
	new   string
	want  string                    // a new problem must contain this
	extra func(s snapshot) snapshot // optional further change
}

const (
	envoyYAML  = "envoy/envoy.yaml"
	configYAML = "manifests/examples/demo/config.yaml"
	baseDeploy = "manifests/base/deployment.yaml"
	echoServer = "manifests/overlays/examples/echo-server.yaml"
	filterYAML = "manifests/istio/envoyfilter.yaml"
)

var brokenCases = []brokenCase{
	// envoy/envoy.yaml
	{name: "mode override off", file: envoyYAML,
		old: "allow_mode_override: true", new: "allow_mode_override: false", want: "allow_mode_override must be true"},
	{name: "fail open", file: envoyYAML,
		old: "failure_mode_allow: false", new: "failure_mode_allow: true", want: "failure_mode_allow must be false"},
	{name: "response body buffered by default", file: envoyYAML,
		old: "response_body_mode: NONE", new: "response_body_mode: BUFFERED", want: "response_body_mode is BUFFERED"},
	{name: "request trailers sent", file: envoyYAML,
		old: "request_trailer_mode: SKIP", new: "request_trailer_mode: SEND", want: "request_trailer_mode is SEND"},
	{name: "response headers skipped", file: envoyYAML,
		old: "response_header_mode: SEND", new: "response_header_mode: SKIP", want: "response_header_mode is SKIP"},
	{name: "body without waiting", file: envoyYAML,
		old: "send_body_without_waiting_for_header_response: false", new: "send_body_without_waiting_for_header_response: true",
		want: "send_body_without_waiting_for_header_response must be false"},
	{name: "message timeout below hook timeout", file: envoyYAML,
		old: "message_timeout: 7s", new: "message_timeout: 5s", want: "message_timeout 5s must exceed extproc.hook_timeout 6s"},
	{name: "message timeout defaulted", file: envoyYAML,
		old: "message_timeout: 7s", new: "", want: "message_timeout 200ms must exceed"},
	{name: "missing @type", file: envoyYAML,
		old: `"@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor`, new: "",
		want: "@type"},
	{name: "unresolvable @type", file: envoyYAML,
		old: "ext_proc.v3.ExternalProcessor", new: "ext_proc.v3.ExternalProcessorr", want: "ExternalProcessorr"},
	{name: "unknown field", file: envoyYAML,
		old: "stat_prefix: mcp_extproc", new: "stat_prefix: mcp_extproc\n              no_such_field: 1", want: "no_such_field"},
	{name: "validation rule", file: envoyYAML,
		old: "port_value: 3000", new: "port_value: 70000", want: "PortValue"},
	{name: "gRPC cluster not HTTP/2", file: envoyYAML,
		old: "http2_protocol_options: {}", new: "http_protocol_options: {}", want: "gRPC needs HTTP/2"},
	{name: "route timeout default", file: envoyYAML,
		old: "timeout: 0s", new: "", want: "route timeout is unset"},
	{name: "idle timeout missing", file: envoyYAML,
		old: "idle_timeout: 600s", new: "", want: "idle_timeout must be set above message_timeout"},
	{name: "route outside mcp_paths", file: envoyYAML,
		old: "match: { path: /mcp }", new: "match: { path: /api }", want: "not in extproc.mcp_paths"},
	{name: "prefix route to server", file: envoyYAML,
		old: "match: { path: /mcp }", new: "match: { prefix: / }", want: "match it by exact path"},
	{name: "ext_proc disabled on the MCP route", file: envoyYAML,
		old: "                  idle_timeout: 600s\n", new: "                  idle_timeout: 600s\n" +
			"                typed_per_filter_config:\n" +
			"                  envoy.filters.http.ext_proc:\n" +
			"                    \"@type\": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute\n" +
			"                    disabled: true\n",
		want: "with ext_proc disabled"},
	{name: "admin on all interfaces", file: envoyYAML,
		old: "address: 127.0.0.1, port_value: 9901", new: "address: 0.0.0.0, port_value: 9901", want: "admin is bound to 0.0.0.0"},
	{name: "buffer below max body", file: envoyYAML,
		old: "per_connection_buffer_limit_bytes: 2097152", new: "per_connection_buffer_limit_bytes: 65536",
		want: "below extproc.max_body_bytes"},
	{name: "MCP filter body size below max_body_bytes", file: envoyYAML,
		old: "max_request_body_size: 1048576", new: "max_request_body_size: 65536", want: "max_request_body_size 65536 is below extproc.max_body_bytes"},
	{name: "MCP filter namespace not pinned", file: envoyYAML,
		old: "mcp_filter_use_new_metadata_namespace: true", new: "mcp_filter_use_new_metadata_namespace: false", want: `writes to "mcp_proxy"`},
	{name: "MCP filter namespace not forwarded", file: envoyYAML,
		old: "[envoy.filters.http.jwt_authn, envoy.filters.http.mcp]", new: "[envoy.filters.http.jwt_authn]", want: `lacks "envoy.filters.http.mcp"`},
	{name: "ext_proc cluster port", file: envoyYAML,
		old: "port_value: 50052", new: "port_value: 50053", want: "the extproc sidecar listens on 50052"},
	{name: "upstream port", file: envoyYAML,
		old: "port_value: 3000", new: "port_value: 3001", want: "no server container listens"},
	{name: "router before ext_proc", file: envoyYAML,
		old: "          - name: envoy.filters.http.ext_proc\n", new: "          - name: envoy.filters.http.router\n" +
			"            typed_config:\n" +
			"              \"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router\n" +
			"          - name: envoy.filters.http.ext_proc\n",
		want: "the router must be the last filter"},
	{name: "no readiness listener", file: envoyYAML,
		old: "pass_through_mode: false", new: "pass_through_mode: true", want: "no listener answers health checks"},

	{name: "stats listener exposes admin", file: envoyYAML,
		old: "path: /stats/prometheus\n", new: "prefix: /\n", want: "exposes the admin interface beyond /stats/prometheus"},
	{name: "stats listener rewrites the path", file: envoyYAML,
		old: "cluster: envoy_admin\n", new: "cluster: envoy_admin\n                  prefix_rewrite: /quitquitquit\n", want: "rewrites the path"},
	{name: "stats cluster misses admin", file: envoyYAML,
		old: "port_value: 9901\n\n", new: "port_value: 9903\n\n", want: "no listener serves /stats/prometheus"},
	{name: "stats listener on the admin port", file: envoyYAML,
		old: "port_value: 9902", new: "port_value: 9901", want: "listens on the admin port 9901"},
	{name: "stats port not declared", file: baseDeploy,
		old: "containerPort: 9902", new: "containerPort: 9903", want: "stats listener port 9902 is not a container port"},

	// plugin configuration
	{name: "hook timeout above message timeout", file: configYAML,
		old: "hook_timeout: 6", new: "hook_timeout: 8", want: "message_timeout 7s must exceed extproc.hook_timeout 8s"},
	{name: "plugin timeout above hook timeout", file: configYAML,
		old: "plugin_timeout: 5", new: "plugin_timeout: 6.5", want: "plugin_timeout 6.5s must stay below"},
	{name: "invalid plugin config", file: configYAML,
		old: "proto: STREAMABLEHTTP", new: "proto: CARRIER_PIGEON", want: "is not a valid configuration"},
	{name: "plugin URL to a missing Service", file: configYAML,
		old: "http://example-plugin:8000/mcp", new: "http://example-plugins:8000/mcp", want: "no Service example-plugins"},
	{name: "plugin URL to a missing port", file: configYAML,
		old: "http://example-plugin:8000/mcp", new: "http://example-plugin:8001/mcp", want: "has no port 8001"},
	{name: "plugin Service with ClientIP affinity", file: "manifests/example-plugin/service.yaml",
		old: "spec:\n", new: "spec:\n  sessionAffinity: ClientIP\n", want: "sets sessionAffinity ClientIP"},

	// manifests
	{name: "unknown manifest field", file: baseDeploy,
		old: "        image: mcp-extproc:dev\n", new: "        image: mcp-extproc:dev\n        imagePolicy: Never\n", want: `unknown field "imagePolicy"`},
	{name: "example image in the product", file: "manifests/base/kustomization.yaml",
		old: "- deployment.yaml\n", new: "- deployment.yaml\n- ../example-plugin\n", want: "runs the example image mcp-extproc-example-plugin:dev"},
	{name: "server container in the product", file: "manifests/base/kustomization.yaml",
		old: "- service.yaml\n", new: "- service.yaml\npatches:\n- path: echo-server.yaml\n",
		want:  "has a server container (server)",
		extra: func(s snapshot) snapshot { return s.put("manifests/base/echo-server.yaml", s.file(echoServer)) }},
	{name: "probe port mismatch", file: baseDeploy,
		old: "          grpc:\n            port: 50052", new: "          grpc:\n            port: 50053", want: "startupProbe port 50053 is not a port"},
	{name: "readiness probe path", file: baseDeploy,
		old: "path: /readyz", new: "path: /ready", want: "readinessProbe is GET /ready on port 9090, want /readyz"},
	{name: "envoy readiness port", file: baseDeploy,
		old: "            path: /ready\n            port: envoy-ready", new: "            path: /ready\n            port: envoy-http",
		want: "readinessProbe is GET /ready on port 8080"},
	{name: "container port not the flag's", file: baseDeploy,
		old: "containerPort: 9090", new: "containerPort: 9091", want: "--admin-addr :9090: port 9090 is not a container port"},
	{name: "port name too long", file: baseDeploy,
		old: "name: envoy-ready\n", new: "name: envoy-readiness-port\n", want: "is not an IANA service name"},
	{name: "writable root filesystem", file: baseDeploy,
		old: "readOnlyRootFilesystem: true", new: "readOnlyRootFilesystem: false", want: "readOnlyRootFilesystem must be true"},
	{name: "privilege escalation", file: "manifests/example-plugin/deployment.yaml",
		old: "allowPrivilegeEscalation: false", new: "allowPrivilegeEscalation: true", want: "allowPrivilegeEscalation must be false"},
	{name: "capabilities kept", file: baseDeploy,
		old:  "            drop: [\"ALL\"]\n          seccompProfile:\n            type: RuntimeDefault\n      containers:",
		new:  "            drop: [\"NET_RAW\"]\n          seccompProfile:\n            type: RuntimeDefault\n      containers:",
		want: "capabilities must drop ALL"},
	{name: "root user", file: baseDeploy,
		old: "runAsUser: 101", new: "runAsUser: 0", want: "runAsUser 0"},
	{name: "no memory limit", file: baseDeploy,
		old: "            memory: 512Mi\n", new: "", want: "no memory limit"},
	{name: "config path not mounted", file: baseDeploy,
		old: "--config=/etc/mcp-extproc/config.yaml", new: "--config=/etc/mcp-extproc/plugins.yaml",
		want: `has no key "plugins.yaml"`},
	{name: "config mounted with subPath", file: baseDeploy,
		old: "          mountPath: /etc/mcp-extproc\n", new: "          mountPath: /etc/mcp-extproc/config.yaml\n          subPath: config.yaml\n",
		want: "mounted with subPath"},
	{name: "envoy config path", file: baseDeploy,
		old: "- /etc/envoy/envoy.yaml", new: "- /etc/envoy.yaml", want: "not in a mounted ConfigMap volume"},
	{name: "Service target port", file: "manifests/base/service.yaml",
		old: "targetPort: envoy-http", new: "targetPort: envoy-htp", want: "which no container of Deployment mcp-server declares"},
	{name: "Service around Envoy", file: "manifests/base/service.yaml",
		old: "targetPort: envoy-http", new: "targetPort: grpc", want: "exposes container extproc around Envoy"},
	{name: "server on all interfaces", file: echoServer,
		old: "--addr=127.0.0.1:3000", new: "--addr=:3000", want: "reachable around Envoy"},
	{name: "grace period too short", file: baseDeploy,
		old: "terminationGracePeriodSeconds: 40", new: "terminationGracePeriodSeconds: 15", want: "terminationGracePeriodSeconds must exceed"},
	{name: "istio grace period too short", file: "manifests/istio/extproc/deployment.yaml",
		old: "terminationGracePeriodSeconds: 30", new: "terminationGracePeriodSeconds: 20", want: "terminationGracePeriodSeconds must exceed"},
	{name: "extproc not a native sidecar", file: baseDeploy,
		old: "        restartPolicy: Always\n", new: "", want: "native sidecar"},
	{name: "Envoy image not pinned", file: baseDeploy,
		old: "envoyproxy/envoy:v1.37.2", new: "envoyproxy/envoy:v1.37-latest", want: "pin an exact Envoy version"},
	{name: "selector mismatch", file: "manifests/example-plugin/deployment.yaml",
		old: "    matchLabels:\n      app.kubernetes.io/name: example-plugin", new: "    matchLabels:\n      app.kubernetes.io/name: example-plugins",
		want: "spec.selector does not match"},
	{name: "generator file missing", file: "envoy/kustomization.yaml",
		old: "  - envoy.yaml", new: "  - envoy2.yaml", want: "kustomize build"},
	{name: "ConfigMap not from envoy/envoy.yaml", file: "envoy/kustomization.yaml",
		old: "  - envoy.yaml", new: "  - envoy.yaml=other.yaml", want: "differs from envoy/envoy.yaml",
		extra: func(s snapshot) snapshot {
			return s.put("envoy/other.yaml", append([]byte("# a second copy\n"), s.file(envoyYAML)...))
		}},
	{name: "Envoy config change does not roll", file: "envoy/kustomization.yaml",
		old: "configMapGenerator:", new: "generatorOptions:\n  disableNameSuffixHash: true\nconfigMapGenerator:",
		want: "volume envoy-config (ConfigMap envoy-config): no checksum/envoy-config annotation"},
	{name: "PodMonitor scrapes Envoy's MCP port", file: "manifests/observability/sidecar/podmonitor.yaml",
		old: "port: envoy-stats", new: "port: envoy-http", want: "port 8080 of Envoy is not its stats listener"},
	{name: "PodMonitor selects nothing", file: "manifests/observability/gateway/podmonitor.yaml",
		old: "app.kubernetes.io/name: mcp-extproc", new: "app.kubernetes.io/name: extproc", want: "PodMonitor mcp-extproc: selects no Deployment's Pods"},
	{name: "unexpected kind", file: "manifests/base/service.yaml",
		old: "kind: Service", new: "kind: Ingress", want: `unexpected kind "v1 Ingress"`},

	// Istio
	{name: "istio mode override off", file: filterYAML,
		old: "allow_mode_override: true", new: "allow_mode_override: false", want: "allow_mode_override must be true"},
	{name: "istio message timeout", file: filterYAML,
		old: "message_timeout: 7s", new: "message_timeout: 2s", want: "message_timeout 2s must exceed"},
	{name: "istio unknown field", file: filterYAML,
		old: "  configPatches:", new: "  configPatchez: []\n  configPatches:", want: `unknown field "configPatchez"`},
	{name: "istio unknown proto field", file: filterYAML,
		old: "stat_prefix: mcp_extproc", new: "stat_prefixx: mcp_extproc", want: "stat_prefixx"},
	{name: "istio filter after router", file: filterYAML,
		old: "operation: INSERT_BEFORE", new: "operation: INSERT_AFTER", want: "want INSERT_BEFORE"},
	{name: "istio cluster not HTTP/2", file: filterYAML,
		old: "http2_protocol_options: {}", new: "http_protocol_options: {}", want: "gRPC needs HTTP/2"},
	{name: "istio cluster to the wrong namespace", file: filterYAML,
		old: "mcp-extproc.mcp-extproc.svc.cluster.local", new: "mcp-extproc.default.svc.cluster.local",
		want: "no Service mcp-extproc in namespace default"},
	{name: "istio cluster name mismatch", file: filterYAML,
		old: "        name: mcp_extproc\n", new: "        name: extproc\n", want: `the ext_proc cluster "mcp_extproc" is not added`},
	{name: "istio Service not headless", file: "manifests/istio/extproc/service.yaml",
		old: "clusterIP: None", new: "", want: "must be headless"},

	// Dockerfile and the build command
	{name: "go build in the Dockerfile", file: "Dockerfile",
		old: "sh hack/build.sh extproc /out", new: "CGO_ENABLED=0 go build -o /out/extproc ./cmd/extproc",
		want: "runs go build directly"},
	{name: "runtime image not distroless", file: "Dockerfile",
		old: "FROM gcr.io/distroless/static-debian12:nonroot AS extproc", new: "FROM debian:12 AS extproc",
		want: "FROM debian:12, want gcr.io/distroless/static-debian12:nonroot"},
	{name: "port not exposed", file: "Dockerfile",
		old: "EXPOSE 50052 9090", new: "EXPOSE 50052", want: "does not EXPOSE 9090"},
	{name: "root user in image", file: "Dockerfile",
		old: "USER 65532:65532\nEXPOSE 8000", new: "USER root\nEXPOSE 8000", want: `USER "root"`},
	{name: "missing target", file: "Dockerfile",
		old: "AS mcp-echo", new: "AS echo", want: `no stage "mcp-echo"`},
	{name: "image without licence label", file: "Dockerfile",
		old: `org.opencontainers.image.source="https://github.com/mcp-extproc/mcp-extproc" \` + "\n" +
			`      org.opencontainers.image.licenses="Apache-2.0"` + "\nCOPY --from=build-extproc",
		new:  `org.opencontainers.image.source="https://github.com/mcp-extproc/mcp-extproc"` + "\nCOPY --from=build-extproc",
		want: "no LABEL org.opencontainers.image.licenses"},
	{name: "image version written in", file: "Dockerfile",
		old: `org.opencontainers.image.version="${VERSION}"`, new: `org.opencontainers.image.version="1.0"`,
		want: "is not stamped from a build argument"},
	{name: "context excludes sources", file: ".dockerignore",
		old: "!pkg/\n", new: "", want: ".dockerignore excludes it"},
	{name: "build script drifts", file: "hack/build.sh",
		old: "-trimpath ", new: "", want: "differs from the project's"},
	{name: "Makefile drifts", file: "Makefile", want: "keep one source of truth",
		extra: func(s snapshot) snapshot {
			return s.put("Makefile", []byte("build:\n\tCGO_ENABLED=0 go build -o bin/$(name) ./cmd/$(name)\n"))
		}},
	{name: "Makefile without the script", file: "Makefile", want: "builds no binary with hack/build.sh",
		extra: func(s snapshot) snapshot { return s.put("Makefile", []byte("build:\n\t@echo nothing\n")) }},

	// kind
	{name: "node port not mapped", file: "hack/kind/cluster.yaml",
		old: "containerPort: 30080", new: "containerPort: 30081", want: "node port 30080 is not in the extraPortMappings"},
	{name: "kind config unknown field", file: "hack/kind/cluster.yaml",
		old: "  extraPortMappings:", new: "  extraPortMapping: []\n  extraPortMappings:", want: "extraPortMapping"},
	{name: "image name drifts", file: "mk/deploy.mk",
		old: "DEPLOY_IMAGE_mcp-echo       := mcp-echo", new: "DEPLOY_IMAGE_mcp-echo       := mcp-echo-server",
		want: "runs mcp-echo:dev, which mk/deploy.mk does not build"},
	{name: "kind images pulled", file: "manifests/overlays/kind/pull-never.yaml",
		old: "      - name: example-plugin\n        imagePullPolicy: Never", new: "      - name: example-plugin\n        imagePullPolicy: Always",
		want: "must not be pulled"},
	{name: "e2e port-forward port", file: "hack/kind/e2e.sh",
		old: "svc/mcp-server :8080", new: "svc/mcp-server :3000", want: "port-forwards svc/mcp-server :3000"},
	{name: "e2e restarts a missing deployment", file: "hack/kind/e2e.sh",
		old: "rollout restart deployment/example-plugin", new: "rollout restart deployment/plugin",
		want: "deployment/plugin does not exist"},
}

// TestBrokenCopies proves each check can fail: every case breaks one thing
// in a copy of the files, and the checks must report it as a new problem.
func TestBrokenCopies(t *testing.T) {
	s := loadSnapshot(t)
	if s.file("Makefile") == nil {
		s = s.put("Makefile", []byte("build:\n\t./hack/build.sh $$c bin\n"))
	}
	rd := newRenderer()
	baseline := map[string]bool{}
	for _, err := range checkAll(s, rd) {
		baseline[err.Error()] = true
	}
	for _, tc := range brokenCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := s
			if tc.old != "" {
				b = b.edit(t, tc.file, tc.old, tc.new)
			}
			if tc.extra != nil {
				b = tc.extra(b)
			}
			var fresh []string
			for _, err := range checkAll(b, rd) {
				if !baseline[err.Error()] {
					fresh = append(fresh, err.Error())
				}
			}
			for _, msg := range fresh {
				if strings.Contains(msg, tc.want) {
					return
				}
			}
			t.Errorf("breaking %s: no new problem mentions %q; new problems:\n%s", tc.file, tc.want, strings.Join(fresh, "\n"))
		})
	}
}
