package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// postScript keeps the path in http_pre_request's state and answers
// http_post_request as the recorded cpex test plugin does (x-post-status,
// x-saw-pre from that state), overwriting x-server and trying headers it
// may not set; x-block-post in the request is a block.
func postScript(_ context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	switch hook {
	case cpex.HTTPPreRequest:
		reply := pluginserver.Continue("post")
		reply.Context = &cpex.PluginContext{State: map[string]any{"pre_path": "/mcp"}, Metadata: map[string]any{}, GlobalContext: pctx.GlobalContext}
		return reply, nil
	case cpex.HTTPPostRequest:
		var p cpex.HTTPPostRequestPayload
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, err
		}
		if _, ok := p.Headers["x-block-post"]; ok {
			return pluginserver.Block("post", cpex.PluginViolation{Reason: "Blocked", Description: "response refused", Code: "POST_BLOCK"}), nil
		}
		return pluginserver.Modify("post", map[string]string{"x-post-status": fmt.Sprint(p.StatusCode), "x-saw-pre": fmt.Sprint(pctx.State["pre_path"]),
			"x-server": "rewritten", "x-saw-server": p.ResponseHeaders["x-server"], "content-length": "1", "x-envoy-upstream-service-time": "0",
			"set-cookie": "stolen=1", "mcp-session-id": "other"})
	}
	return pluginserver.Continue("post"), nil
}

// TestHTTPPostRequest: through the strict fake Envoy, the headers
// http_post_request returns reach the client, the ones it may not set do
// not, it sees the request phase's context, and a config whose only other
// plugin is a pre hook (no response headers otherwise) still asks for them.
func TestHTTPPostRequest(t *testing.T) {
	post := plugintest.NewScripted("post", cpex.HTTPPreRequest, cpex.HTTPPostRequest)
	post.SetFunc(postScript)
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
	h := newHarness(t, `
plugins:
  - name: post
    kind: external
    hooks: [http_pre_request, http_post_request]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
  - name: guard
    kind: external
    hooks: [tool_pre_invoke]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
`, post, guard)
	body := `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`
	up := func(ctx context.Context, r *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
		res, err := jsonUpstream(http.StatusOK, body)(ctx, r)
		res.Headers.Set("X-Server", "orig")
		res.Headers.Set("Set-Cookie", "session=1")
		return res, err
	}
	for _, req := range []struct {
		name, body string
	}{
		{"tool call (request body read, response headers skipped without the hook)", echoCall},
		{"tools/list (passthrough without the hook)", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`},
	} {
		t.Run(req.name, func(t *testing.T) {
			post.Reset()
			res := h.do(mcpPost(req.body), up)
			if res.Status != http.StatusOK || res.Immediate || string(res.Body) != body {
				t.Fatalf("status %d immediate %v body %s", res.Status, res.Immediate, res.Body)
			}
			for k, want := range map[string]string{"x-post-status": "200", "x-saw-pre": "/mcp", "x-server": "rewritten",
				"x-saw-server": "orig", "set-cookie": "session=1", "mcp-session-id": ""} {
				if got := res.Headers.Get(k); got != want {
					t.Errorf("the client got %s: %q, want %q", k, got, want)
				}
			}
			if res.Headers.Get("x-envoy-upstream-service-time") == "0" || res.Headers.Get("content-length") == "1" {
				t.Errorf("a forbidden header was set: %v", res.Headers)
			}
		})
	}
	t.Run("a violation refuses the response", func(t *testing.T) {
		res := h.do(mcpPost(echoCall, "X-Block-Post", "1"), up)
		if !res.Immediate || res.Status != http.StatusForbidden || res.Headers.Get("x-server") != "" {
			t.Errorf("status %d immediate %v headers %v", res.Status, res.Immediate, res.Headers)
		}
	})
}
