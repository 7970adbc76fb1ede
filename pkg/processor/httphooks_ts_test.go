package processor_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/nodeplugin"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
)

// tsGate is the HTTP-hook plugin of the TypeScript SDK server: two tokens,
// alice may execute tools and bob may not, a header added before the
// server, a delegated token per tool, a header on the response.
const (
	tsGatePolicy = `{"plugins":[{"name":"gate","hooks":["http_pre_request","http_auth_resolve_user","http_auth_check_permission","token_delegate","http_post_request"],` +
		`"http":{"tokens":{"good-token":"alice@example.com","bob-token":"bob@example.com"},"add_headers":{"x-added":"1"},` +
		`"allow":{"alice@example.com":["tools.execute"]},"delegate_prefix":"delegated-","post_headers":{"x-post":"ts"}}}]}`
	tsGateConfig = `
plugins:
  - name: gate
    kind: external
    hooks: [http_pre_request, http_auth_resolve_user, http_auth_check_permission, token_delegate, http_post_request]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
`
)

// The HTTP, auth and identity hooks served by a plugin on the official
// TypeScript SDK (a Node.js process), through the strict fake Envoy.
func TestHTTPHooksTypeScriptPlugin(t *testing.T) {
	node := plugintest.StartNode(t, nodeplugin.Options{Policy: tsGatePolicy})
	h := newHarnessWith(t, tsGateConfig, harnessOptions{url: node.URL()})
	var seen *envoytest.UpstreamRequest
	up := func(ctx context.Context, r *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
		seen = r
		return jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`)(ctx, r)
	}

	t.Run("allowed caller, delegated token", func(t *testing.T) {
		seen = nil
		res := h.do(mcpPost(echoCall, "Authorization", "Bearer good-token"), up)
		if res.Status != http.StatusOK || seen == nil {
			t.Fatalf("status %d %s", res.Status, res.Body)
		}
		if got := seen.Headers.Get("x-added"); got != "1" {
			t.Errorf("the MCP server got x-added %q, want the pre_request header", got)
		}
		if got := seen.Headers.Get("authorization"); got != "Bearer delegated-echo" {
			t.Errorf("the MCP server got authorization %q, want the delegated token", got)
		}
		if got := res.Headers.Get("x-post"); got != "ts" {
			t.Errorf("the client got x-post %q, want http_post_request's header", got)
		}
	})

	t.Run("bad token", func(t *testing.T) {
		seen = nil
		res := h.do(mcpPost(echoCall, "Authorization", "Bearer forged"), up)
		if !res.Immediate || res.Status != http.StatusUnauthorized || res.Headers.Get("www-authenticate") != "Bearer" || seen != nil {
			t.Errorf("status %d immediate %v headers %v upstream reached %v", res.Status, res.Immediate, res.Headers, seen != nil)
		}
	})

	t.Run("permission refused", func(t *testing.T) {
		seen = nil
		res := h.do(mcpPost(echoCall, "Authorization", "Bearer bob-token"), up)
		if res.Status != http.StatusForbidden || seen != nil {
			t.Fatalf("status %d upstream reached %v: %s", res.Status, seen != nil, res.Body)
		}
		if body := string(res.Body); !strings.Contains(body, "gate") || !strings.Contains(body, "may not tools.execute") || !strings.Contains(body, `"id":3`) {
			t.Errorf("body %s, want the JSON-RPC error naming the plugin and its reason", body)
		}
	})
}
