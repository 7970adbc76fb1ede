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
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver/policy"
)

// httpPlugins: "gate" has the two HTTP hooks, "watcher" records what
// tool_pre_invoke sees.
const httpPlugins = `
plugins:
  - name: gate
    kind: external
    hooks: [http_pre_request, http_auth_resolve_user]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
  - name: watcher
    kind: external
    hooks: [tool_pre_invoke]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
`

var (
	forbidden    = 403
	unauthorized = 401
)

// gateScript answers as the recorded cpex test plugin does: pre_request
// adds x-added, overwrites x-keep and tries headers it may not set, and
// blocks a request with x-block; resolve_user knows one token.
func gateScript(_ context.Context, hook cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	switch hook {
	case cpex.HTTPPreRequest:
		var p cpex.HTTPPreRequestPayload
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, err
		}
		if _, ok := p.Headers["x-block"]; ok {
			return pluginserver.Block("gate", cpex.PluginViolation{Reason: "Blocked", Description: "x-block header present",
				Code: "BLOCKED_HEADER", HTTPStatusCode: &forbidden, HTTPHeaders: map[string]string{"x-blocked-by": "hooks"}}), nil
		}
		return pluginserver.Modify("gate", map[string]string{"x-added": "1", "x-keep": "changed", "authorization": "Bearer plugin",
			"host": "evil.example", "x-envoy-original-path": "/x", "content-length": "1", "x-token-seen": p.Headers["authorization"]})
	case cpex.HTTPAuthResolveUser:
		var p cpex.HTTPAuthResolveUserPayload
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, err
		}
		switch {
		case p.Credentials == nil:
			return pluginserver.Continue("gate"), nil
		case p.Credentials.Scheme == "Bearer" && p.Credentials.Credentials == "good-token" && p.Headers["x-added"] == "1":
			return pluginserver.Modify("gate", map[string]any{"email": "alice@example.com", "full_name": "Alice", "is_admin": false, "is_active": true})
		}
		return pluginserver.Block("gate", cpex.PluginViolation{Reason: "Invalid token", Description: "token not recognised",
			Code: "INVALID_TOKEN", HTTPStatusCode: &unauthorized, HTTPHeaders: map[string]string{"WWW-Authenticate": "Bearer"}}), nil
	}
	return pluginserver.Continue("gate"), nil
}

func TestHTTPHooks(t *testing.T) {
	gate := plugintest.NewScripted("gate", cpex.HTTPPreRequest, cpex.HTTPAuthResolveUser)
	gate.SetFunc(gateScript)
	watcher := plugintest.NewScripted("watcher", cpex.ToolPreInvoke)
	h := newHarness(t, httpPlugins+"extproc:\n  user_header: x-user\n", gate, watcher)
	var seen *envoytest.UpstreamRequest
	up := func(ctx context.Context, r *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
		seen = r
		return jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`)(ctx, r)
	}

	t.Run("headers set and a user resolved", func(t *testing.T) {
		gate.Reset()
		watcher.Reset()
		seen = nil
		res := h.do(mcpPost(echoCall, "Authorization", "Bearer good-token", "X-Keep", "k", "X-User", "mallory"), up)
		if res.Status != http.StatusOK || seen == nil {
			t.Fatalf("status %d %s", res.Status, res.Body)
		}
		for k, want := range map[string]string{"x-added": "1", "x-keep": "changed", "authorization": "Bearer good-token",
			"x-token-seen": "Bearer good-token"} {
			if got := seen.Headers.Get(k); got != want {
				t.Errorf("the MCP server got %s: %q, want %q", k, got, want)
			}
		}
		if seen.Authority == "evil.example" || seen.Headers.Get("x-envoy-original-path") != "" {
			t.Errorf("a forbidden header was set: authority %q, headers %v", seen.Authority, seen.Headers)
		}
		calls := watcher.Calls()
		if len(calls) != 1 {
			t.Fatalf("watcher called %d times", len(calls))
		}
		g := calls[0].Context.GlobalContext
		if uc := g.UserContext; uc == nil || uc.UserID != "alice@example.com" || uc.AuthMethod != "plugin" || uc.FullName != "Alice" {
			t.Errorf("user_context %+v (user %s), want alice from the resolve hook, not the x-user header", g.UserContext, g.User)
		}
	})

	t.Run("bad token", func(t *testing.T) {
		seen = nil
		res := h.do(mcpPost(echoCall, "Authorization", "Bearer bad"), up)
		if !res.Immediate || res.Status != http.StatusUnauthorized || res.Headers.Get("www-authenticate") != "Bearer" || seen != nil {
			t.Errorf("status %d immediate %v headers %v upstream reached %v", res.Status, res.Immediate, res.Headers, seen != nil)
		}
		if !strings.Contains(string(res.Body), "Invalid token") {
			t.Errorf("body %s", res.Body)
		}
	})

	t.Run("pre_request blocks with the request's id", func(t *testing.T) {
		seen = nil
		res := h.do(mcpPost(echoCall, "X-Block", "1"), up)
		if !res.Immediate || res.Status != http.StatusForbidden || res.Headers.Get("x-blocked-by") != "hooks" || seen != nil {
			t.Errorf("status %d immediate %v headers %v upstream reached %v", res.Status, res.Immediate, res.Headers, seen != nil)
		}
		var body struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(res.Body, &body); err != nil || string(body.ID) != "3" || !strings.Contains(body.Error.Message, "Blocked") {
			t.Errorf("body %s, want the JSON-RPC error for id 3", res.Body)
		}
	})

	t.Run("GET blocked at the headers", func(t *testing.T) {
		res := h.do(&envoytest.Request{Method: http.MethodGet, Path: "/mcp", Headers: http.Header{"X-Block": {"1"}, "Accept": {"text/event-stream"}}}, up)
		if !res.Immediate || res.Status != http.StatusForbidden {
			t.Errorf("status %d immediate %v", res.Status, res.Immediate)
		}
	})
}

// TestResolveHookAfterVerifiedSources: a verified JWT names the caller
// without a plugin round trip.
func TestResolveHookAfterVerifiedSources(t *testing.T) {
	gate := plugintest.NewScripted("gate", cpex.HTTPAuthResolveUser)
	gate.SetFunc(gateScript)
	watcher := plugintest.NewScripted("watcher", cpex.ToolPreInvoke)
	h := newHarness(t, strings.Replace(httpPlugins, "[http_pre_request, http_auth_resolve_user]", "[http_auth_resolve_user]", 1)+
		"extproc:\n  identity:\n    sources:\n      - jwt_metadata: {key: jwt_payload}\n", gate, watcher)
	h.filter.Forwarding = forwarding
	req := mcpPost(echoCall, "Authorization", "Bearer bad")
	req.Info = envoytest.StreamInfo{DynamicMetadata: verifiedJWT(t, map[string]any{"sub": "carol"})}
	res := h.do(req, jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`))
	if res.Status != http.StatusOK || gate.CallCount() != 0 {
		t.Fatalf("status %d, resolve hook called %d times", res.Status, gate.CallCount())
	}
	if uc := watcher.Calls()[0].Context.GlobalContext.UserContext; uc == nil || uc.UserID != "carol" {
		t.Errorf("user_context %+v", uc)
	}
}

// TestHTTPStateReachesToolHooks: what a plugin keeps in its context in
// http_pre_request (its own state, the global state) is there in
// tool_pre_invoke of the same request, with the identity resolved after it;
// each message of a batch starts from it.
func TestHTTPStateReachesToolHooks(t *testing.T) {
	keeper := plugintest.NewScripted("keeper", cpex.HTTPPreRequest, cpex.ToolPreInvoke)
	keeper.SetFunc(func(_ context.Context, hook cpex.HookType, _ json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		if hook != cpex.HTTPPreRequest {
			return pluginserver.Continue("keeper"), nil
		}
		reply := pluginserver.Continue("keeper")
		g := pctx.GlobalContext
		g.State = map[string]any{"seen_pre": true}
		reply.Context = &cpex.PluginContext{State: map[string]any{"pre_path": "/mcp"}, Metadata: map[string]any{}, GlobalContext: g}
		return reply, nil
	})
	h := newHarness(t, `
plugins:
  - name: keeper
    kind: external
    hooks: [http_pre_request, tool_pre_invoke]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
extproc:
  identity:
    sources:
      - jwt_metadata: {key: jwt_payload}
`, keeper)
	h.filter.Forwarding = forwarding
	batch := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}]`
	req := mcpPost(batch)
	req.Info = envoytest.StreamInfo{DynamicMetadata: verifiedJWT(t, map[string]any{"sub": "alice"})}
	h.do(req, jsonUpstream(http.StatusOK, `[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{}}]`))
	var tools int
	for _, c := range keeper.Calls() {
		if c.Hook != cpex.ToolPreInvoke {
			continue
		}
		tools++
		pc := c.Context
		if pc.State["pre_path"] != "/mcp" || pc.GlobalContext.State["seen_pre"] != true {
			t.Errorf("tool_pre_invoke context: state %v, global state %v", pc.State, pc.GlobalContext.State)
		}
		if uc := pc.GlobalContext.UserContext; uc == nil || uc.UserID != "alice" {
			t.Errorf("tool_pre_invoke user_context %+v", uc)
		}
	}
	if tools != 2 {
		t.Errorf("%d tool_pre_invoke calls, want 2", tools)
	}
}

// TestTokenCheckPlugin: the example plugin's token check, through the
// sidecar: a denied and an allowed caller.
func TestTokenCheckPlugin(t *testing.T) {
	tc, err := policy.NewTokenCheck("", map[string]string{"s3cret-token": "alice@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	watcher := plugintest.NewScripted("watcher", cpex.ToolPreInvoke)
	h := newHarness(t, `
plugins:
  - name: TokenCheck
    kind: external
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
  - name: watcher
    kind: external
    hooks: [tool_pre_invoke]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
`, tc, watcher)
	up := jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`)
	if res := h.do(mcpPost(echoCall, "Authorization", "Bearer guess"), up); res.Status != http.StatusUnauthorized {
		t.Errorf("denied caller: status %d %s", res.Status, res.Body)
	}
	if res := h.do(mcpPost(echoCall, "Authorization", "Bearer s3cret-token"), up); res.Status != http.StatusOK || res.Immediate {
		t.Fatalf("allowed caller: status %d %s", res.Status, res.Body)
	}
	calls := watcher.Calls()
	if len(calls) != 1 || calls[0].Context.GlobalContext.UserContext == nil || calls[0].Context.GlobalContext.UserContext.Email != "alice@example.com" {
		t.Errorf("watcher calls %+v", calls)
	}
}
