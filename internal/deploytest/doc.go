// Package deploytest holds the static checks of the deployment files: the
// Envoy bootstrap (envoy/envoy.yaml, its stats listener included), the
// Kubernetes manifests (manifests/, rendered with kustomize), the Helm chart
// (charts/mcp-extproc, rendered with bin/chartcheck, helm's library: the same checks, plus config
// checksums and parity of its defaults with manifests/base), the Istio
// EnvoyFilter, the monitors, NetworkPolicies, alerts and the Grafana
// dashboard (every metric they name must be exported by pkg/metrics or by
// Envoy), the Dockerfile and the kind flow (hack/kind, mk/deploy.mk).
//
// It has no exported API: everything lives in its tests, which run with
// `go test ./internal/deploytest/`. Each check is a function of file contents
// (a snapshot of the files), so the same checks run on the real files and on
// deliberately broken copies of them, which proves every check can fail.
package deploytest
