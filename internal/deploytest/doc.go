// Package deploytest holds the static checks of the deployment files: the
// Envoy bootstrap (envoy/envoy.yaml), the Kubernetes manifests (manifests/,
// rendered with kustomize), the Istio EnvoyFilter, the Dockerfile and the kind
// flow (hack/kind, mk/deploy.mk).
//
// It has no exported API: everything lives in its tests, which run with
// `go test ./internal/deploytest/`. Each check is a function of file contents
// (a snapshot of the files), so the same checks run on the real files and on
// deliberately broken copies of them, which proves every check can fail.
package deploytest
