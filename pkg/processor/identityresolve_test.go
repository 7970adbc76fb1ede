package processor_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// resolverScript answers as the recorded cpex test plugin does: a subject
// for raw-alice, rejected for any other token.
func resolverScript(_ context.Context, _ cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	var p cpex.IdentityResolvePayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, err
	}
	if p.RawToken == "raw-alice" && p.Source == "bearer" {
		return pluginserver.Modify("resolver", map[string]any{"subject": map[string]any{"id": "alice@example.com", "type": "user",
			"roles": []string{"developer"}, "permissions": []string{"tools.execute"}, "teams": []string{"team-a"}, "claims": map[string]any{"sub": "alice"}},
			"delegation": nil, "rejected": false, "reject_status": 401, "reject_reason": ""})
	}
	return pluginserver.Modify("resolver", map[string]any{"subject": nil, "rejected": true, "reject_status": 401, "reject_reason": "unknown token"})
}

// TestIdentityResolve: through the strict fake Envoy, a plugin with
// identity_resolve is an identity source: its subject wins over a spoofed
// legacy header, an unknown token is a 401 with WWW-Authenticate, no token
// or a verified JWT means no call.
func TestIdentityResolve(t *testing.T) {
	resolver := plugintest.NewScripted("resolver", cpex.IdentityResolve)
	resolver.SetFunc(resolverScript)
	watcher := plugintest.NewScripted("watcher", cpex.ToolPreInvoke)
	cfg := strings.Replace(httpPlugins, "name: gate\n    kind: external\n    hooks: [http_pre_request, http_auth_resolve_user]", "name: resolver\n    kind: external\n    hooks: [identity_resolve]", 1)
	h := newHarness(t, cfg+"extproc:\n  user_header: x-user\n", resolver, watcher)
	up := jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`)

	watcher.Reset()
	if res := h.do(mcpPost(echoCall, "Authorization", "Bearer raw-alice", "X-User", "mallory"), up); res.Status != http.StatusOK || res.Immediate {
		t.Fatalf("known token: status %d %s", res.Status, res.Body)
	}
	calls := watcher.Calls()
	if len(calls) != 1 {
		t.Fatalf("watcher called %d times", len(calls))
	}
	if uc := calls[0].Context.GlobalContext.UserContext; uc == nil || uc.UserID != "alice@example.com" || uc.Email != "alice@example.com" ||
		uc.AuthMethod != "plugin" || len(uc.Teams) != 1 || uc.Teams[0] != "team-a" || len(uc.Roles) != 1 {
		t.Errorf("user_context %+v, want alice from identity_resolve, not the x-user header", uc)
	}

	res := h.do(mcpPost(echoCall, "Authorization", "Bearer guess"), up)
	if !res.Immediate || res.Status != http.StatusUnauthorized || res.Headers.Get("www-authenticate") != "Bearer" ||
		!strings.Contains(string(res.Body), "unknown token") || !strings.Contains(string(res.Body), "resolver") {
		t.Errorf("unknown token: status %d immediate %v headers %v body %s", res.Status, res.Immediate, res.Headers, res.Body)
	}

	resolver.Reset()
	if res := h.do(mcpPost(echoCall), up); res.Status != http.StatusOK || resolver.CallCount() != 0 {
		t.Errorf("no token: status %d, resolver called %d times", res.Status, resolver.CallCount())
	}
}

// TestIdentityResolveAfterVerifiedSources: a verified JWT names the caller
// without asking identity_resolve.
func TestIdentityResolveAfterVerifiedSources(t *testing.T) {
	resolver := plugintest.NewScripted("resolver", cpex.IdentityResolve)
	resolver.SetFunc(resolverScript)
	h := newHarness(t, `
plugins:
  - name: resolver
    kind: external
    hooks: [identity_resolve]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
extproc:
  identity:
    sources:
      - jwt_metadata: {key: jwt_payload}
`, resolver)
	h.filter.Forwarding = forwarding
	req := mcpPost(echoCall, "Authorization", "Bearer guess")
	req.Info = envoytest.StreamInfo{DynamicMetadata: verifiedJWT(t, map[string]any{"sub": "carol"})}
	if res := h.do(req, jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`)); res.Status != http.StatusOK || resolver.CallCount() != 0 {
		t.Errorf("status %d, resolver called %d times", res.Status, resolver.CallCount())
	}
}
