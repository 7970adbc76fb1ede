package processor_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// delegateScript answers as the recorded cpex test plugin does: the
// delegated token for the tool in forwarded_headers. "secret" is refused,
// "quiet" gets no answer, "broken" fails, "bare" gets a delegated_token only.
func delegateScript(_ context.Context, _ cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	var p cpex.TokenDelegatePayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, err
	}
	if p.BearerToken != "user-tok" {
		return pluginserver.Block("delegate", cpex.PluginViolation{Reason: "No token", Description: "caller token missing", Code: "NO_TOKEN"}), nil
	}
	switch p.TargetName {
	case "secret":
		return pluginserver.Block("delegate", cpex.PluginViolation{Reason: "Delegation refused", Description: "no grant for secret", Code: "DELEGATION_DENIED"}), nil
	case "quiet":
		return pluginserver.Continue("delegate"), nil
	case "broken":
		return nil, errors.New("token service down")
	case "bare":
		return pluginserver.Modify("delegate", map[string]any{"delegated_token": "bare-tok"})
	}
	return pluginserver.Modify("delegate", map[string]any{"delegated_token": "delegated-" + p.TargetName,
		"forwarded_headers": map[string]string{"authorization": "Bearer delegated-" + p.TargetName, "x-envoy-foo": "no"},
		"cache_key":         p.TargetName + ":alice", "cache_ttl": 60})
}

func callOf(id int, tool string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": map[string]any{}}})
	return string(b)
}

// TestTokenDelegate: through the strict fake Envoy, the MCP server sees the
// delegated token and never the caller's; a refused or failed delegation
// refuses the call with its JSON-RPC error.
func TestTokenDelegate(t *testing.T) {
	del := plugintest.NewScripted("delegate", cpex.TokenDelegate)
	del.SetFunc(delegateScript)
	h := newHarness(t, `
plugins:
  - name: delegate
    kind: external
    hooks: [token_delegate]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
`, del)
	var seen *envoytest.UpstreamRequest
	up := func(ctx context.Context, r *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
		seen = r
		return jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`)(ctx, r)
	}
	call := func(body string) *envoytest.Result {
		seen = nil
		return h.do(mcpPost(body, "Authorization", "Bearer user-tok", "X-Api-Key", "user-tok", "Cookie", "s=user-tok"), up)
	}
	for _, tc := range []struct{ tool, auth string }{{"echo", "Bearer delegated-echo"}, {"bare", "Bearer bare-tok"}, {"quiet", ""}} {
		t.Run("delegated "+tc.tool, func(t *testing.T) {
			res := call(callOf(3, tc.tool))
			if res.Status != http.StatusOK || seen == nil {
				t.Fatalf("status %d %s", res.Status, res.Body)
			}
			if got := seen.Headers.Get("authorization"); got != tc.auth {
				t.Errorf("the MCP server got authorization %q, want %q", got, tc.auth)
			}
			for k, v := range seen.Headers {
				if strings.Contains(strings.Join(v, ","), "user-tok") {
					t.Errorf("the caller's token reached the MCP server in %s", k)
				}
			}
			if seen.Headers.Get("x-envoy-foo") != "" {
				t.Error("a forbidden forwarded header was set")
			}
		})
	}
	for _, tc := range []struct{ tool, want string }{{"secret", "Delegation refused"}, {"broken", "token service down"}} {
		t.Run("refused "+tc.tool, func(t *testing.T) {
			res := call(callOf(3, tc.tool))
			var body struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if seen != nil || json.Unmarshal(res.Body, &body) != nil || string(body.ID) != "3" || !strings.Contains(body.Error.Message, tc.want) {
				t.Errorf("upstream reached %v, body %s", seen != nil, res.Body)
			}
		})
	}
	t.Run("a batch needing two credentials", func(t *testing.T) {
		res := call("[" + callOf(1, "echo") + "," + callOf(2, "other") + "]")
		if seen != nil || !strings.Contains(string(res.Body), "different credentials") {
			t.Errorf("upstream reached %v, body %s", seen != nil, res.Body)
		}
	})
	t.Run("the plugin got the caller's real token", func(t *testing.T) {
		del.Reset()
		call(callOf(3, "echo"))
		calls := del.Calls()
		var p cpex.TokenDelegatePayload
		if len(calls) != 1 || json.Unmarshal(calls[0].Payload, &p) != nil || p.BearerToken != "user-tok" || p.TargetName != "echo" || p.TargetType != "tool" {
			t.Fatalf("calls %+v", calls)
		}
		// What the token is for: the MCP server's URI and the call's
		// permission (cpex's target_audience, required_permissions).
		if !strings.HasPrefix(p.TargetAudience, "http") || !strings.HasSuffix(p.TargetAudience, "/mcp") || len(p.RequiredPermissions) != 1 || p.RequiredPermissions[0] != "tools.execute" {
			t.Errorf("target_audience %q, required_permissions %v", p.TargetAudience, p.RequiredPermissions)
		}
	})
}
