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

// rbacScript grants alice everything and nobody else anything, as the
// recorded cpex test plugin does for tools.execute.
func rbacScript(_ context.Context, _ cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	var p cpex.HTTPAuthCheckPermissionPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, err
	}
	granted := p.UserEmail == "alice@example.com"
	return pluginserver.Modify("rbac", cpex.PermissionDecision{Granted: &granted, Reason: "alice-only " + p.Permission})
}

const permissionPlugins = `
plugins:
  - name: rbac
    kind: external
    hooks: [http_auth_check_permission]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
  - name: watcher
    kind: external
    hooks: [tool_pre_invoke]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
extproc:
  identity:
    sources:
      - jwt_metadata: {key: jwt_payload}
`

// TestCheckPermission: through the strict fake Envoy, each MCP request is
// checked with ContextForge's permission for its operation, as the verified
// caller; granted:false is a 403 with the JSON-RPC error of the request's
// id naming the plugin and the reason, and nothing reaches the server or
// the tool hooks.
func TestCheckPermission(t *testing.T) {
	rbac := plugintest.NewScripted("rbac", cpex.HTTPAuthCheckPermission)
	rbac.SetFunc(rbacScript)
	watcher := plugintest.NewScripted("watcher", cpex.ToolPreInvoke)
	h := newHarness(t, permissionPlugins, rbac, watcher)
	h.filter.Forwarding = forwarding
	var reached bool
	up := func(ctx context.Context, r *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
		reached = true
		return jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`)(ctx, r)
	}
	call := func(body, email string) envoytest.Result {
		rbac.Reset()
		watcher.Reset()
		reached = false
		req := mcpPost(body, "User-Agent", "probe/1")
		req.Info = envoytest.StreamInfo{DynamicMetadata: verifiedJWT(t, map[string]any{"sub": email, "email": email})}
		return *h.do(req, up)
	}
	for _, tc := range []struct {
		name, body, email, permission, resourceType string
		granted                                     bool
	}{
		{"tool call granted", echoCall, "alice@example.com", "tools.execute", "tool", true},
		{"tool call denied", echoCall, "bob@example.com", "tools.execute", "tool", false},
		{"tools/list denied", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, "bob@example.com", "tools.read", "tool", false},
		{"prompts/get", `{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"p"}}`, "bob@example.com", "prompts.read", "prompt", false},
		{"resources/read", `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///a"}}`, "alice@example.com", "resources.read", "resource", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(tc.body, tc.email)
			calls := rbac.Calls()
			if len(calls) != 1 {
				t.Fatalf("rbac called %d times", len(calls))
			}
			var p cpex.HTTPAuthCheckPermissionPayload
			if err := json.Unmarshal(calls[0].Payload, &p); err != nil || p.UserEmail != tc.email || p.Permission != tc.permission ||
				p.ResourceType != tc.resourceType || p.AuthMethod != "jwt" || p.UserAgent != "probe/1" {
				t.Errorf("payload %s (%v)", calls[0].Payload, err)
			}
			if tc.granted {
				if res.Immediate || res.Status != http.StatusOK || !reached {
					t.Errorf("granted: status %d immediate %v reached %v %s", res.Status, res.Immediate, reached, res.Body)
				}
				return
			}
			if !res.Immediate || res.Status != http.StatusForbidden || reached || watcher.CallCount() != 0 {
				t.Errorf("denied: status %d immediate %v reached %v tool hooks %d", res.Status, res.Immediate, reached, watcher.CallCount())
			}
			var body struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Message string         `json:"message"`
					Data    map[string]any `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(res.Body, &body); err != nil || string(body.ID) != "3" || body.Error.Data["plugin"] != "rbac" ||
				!strings.Contains(body.Error.Message, "alice-only "+tc.permission) {
				t.Errorf("body %s, want the JSON-RPC error for id 3 naming rbac and the reason", res.Body)
			}
		})
	}
	t.Run("ping is not checked", func(t *testing.T) {
		res := call(`{"jsonrpc":"2.0","id":3,"method":"ping"}`, "bob@example.com")
		if rbac.CallCount() != 0 || res.Immediate {
			t.Errorf("ping: rbac called %d times, immediate %v", rbac.CallCount(), res.Immediate)
		}
	})
}

// TestCheckPermissionAlone: with no MCP hook at all, a permission plugin
// still has the body read, so it is asked.
func TestCheckPermissionAlone(t *testing.T) {
	rbac := plugintest.NewScripted("rbac", cpex.HTTPAuthCheckPermission)
	rbac.SetFunc(rbacScript)
	cfg := strings.Replace(permissionPlugins, "  - name: watcher\n    kind: external\n    hooks: [tool_pre_invoke]\n    mcp: {proto: STREAMABLEHTTP, url: \"${PLUGIN_URL}\"}\n", "", 1)
	h := newHarness(t, cfg, rbac)
	h.filter.Forwarding = forwarding
	req := mcpPost(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	req.Info = envoytest.StreamInfo{DynamicMetadata: verifiedJWT(t, map[string]any{"sub": "bob"})}
	res := h.do(req, jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}`))
	if rbac.CallCount() != 1 || res.Status != http.StatusForbidden {
		t.Errorf("rbac called %d times, status %d %s", rbac.CallCount(), res.Status, res.Body)
	}
}
