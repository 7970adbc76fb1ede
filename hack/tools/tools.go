//go:build tools

// Package tools pins the build tools that the product does not link: helm,
// which `make test` uses to lint and render charts/mcp-extproc. Its own
// module keeps helm and its dependencies out of the product's go.mod.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
