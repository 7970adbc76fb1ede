package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// stateHooks are the hooks of one tools/call, in the order the sidecar
// runs them: the permission check, the pre hook and the delegate at the
// request body, http_post_request at the response headers, the post hook
// at the response body.
var stateHooks = []cpex.HookType{cpex.HTTPAuthCheckPermission, cpex.ToolPreInvoke, cpex.TokenDelegate, cpex.HTTPPostRequest, cpex.ToolPostInvoke}

// keepState answers each hook as a plugin that remembers it ran: its own
// state and the global state get the hook's name (with the target tool,
// for the hooks that have one), and the permission is granted.
func keepState(name string) pluginserver.HookFunc {
	return func(_ context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		var target struct {
			Name       string `json:"name"`
			TargetName string `json:"target_name"`
		}
		_ = json.Unmarshal(payload, &target)
		mark := string(hook) + ":" + target.Name + target.TargetName
		reply := pluginserver.Continue(name)
		if hook == cpex.HTTPAuthCheckPermission {
			var err error
			if reply, err = pluginserver.Modify(name, map[string]any{"granted": true, "reason": "ok"}); err != nil {
				return nil, err
			}
		}
		state := maps.Clone(pctx.State)
		state[name+"."+string(hook)] = mark
		g := pctx.GlobalContext
		g.State = maps.Clone(g.State)
		g.State["global."+name+"."+string(hook)] = mark
		reply.Context = &cpex.PluginContext{State: state, Metadata: pctx.Metadata, GlobalContext: g}
		return reply, nil
	}
}

const stateConfig = `
plugins:
  - name: keeper
    kind: external
    hooks: [http_auth_check_permission, tool_pre_invoke, token_delegate, http_post_request, tool_post_invoke]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
  - name: reader
    kind: external
    priority: 200
    hooks: [tool_pre_invoke, tool_post_invoke]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
`

// TestMessageStateAcrossHooks: what a plugin keeps in its context in one
// hook of a tools/call (its own state, and the global state every plugin
// sees) is in its context in the later hooks of the same call:
// http_auth_check_permission → tool_pre_invoke → token_delegate →
// http_post_request → tool_post_invoke, as in ContextForge's context table.
func TestMessageStateAcrossHooks(t *testing.T) {
	keeper := plugintest.NewScripted("keeper", stateHooks...)
	keeper.SetFunc(keepState("keeper"))
	reader := plugintest.NewScripted("reader", cpex.ToolPreInvoke, cpex.ToolPostInvoke)
	h := newHarness(t, stateConfig, keeper, reader)
	res := h.do(mcpPost(echoCall, "Authorization", "Bearer user-token"),
		jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"hi"}]}}`))
	if res.Status != http.StatusOK {
		t.Fatalf("status %d %s", res.Status, res.Body)
	}
	calls := keeper.Calls()
	var got []cpex.HookType
	for _, c := range calls {
		got = append(got, c.Hook)
	}
	if !slices.Equal(got, stateHooks) {
		t.Fatalf("keeper's hooks %v, want %v", got, stateHooks)
	}
	for i, c := range calls {
		for _, earlier := range stateHooks[:i] {
			want := string(earlier) + ":"
			if earlier != cpex.HTTPPostRequest && earlier != cpex.HTTPAuthCheckPermission {
				want += "echo"
			}
			if v := c.Context.State["keeper."+string(earlier)]; v != want {
				t.Errorf("%s: keeper's state from %s is %v, want %q", c.Hook, earlier, v, want)
			}
			if v := c.Context.GlobalContext.State["global.keeper."+string(earlier)]; v != want {
				t.Errorf("%s: global state from %s is %v, want %q", c.Hook, earlier, v, want)
			}
		}
		if _, ok := c.Context.State["keeper."+string(c.Hook)]; ok {
			t.Errorf("%s: the plugin's state already has its own mark", c.Hook)
		}
	}
	// Another plugin sees the global state, never keeper's own state.
	for _, c := range reader.Calls() {
		if c.Context.GlobalContext.State["global.keeper.http_auth_check_permission"] != "http_auth_check_permission:" {
			t.Errorf("reader's %s: global state %v", c.Hook, c.Context.GlobalContext.State)
		}
		if len(c.Context.State) != 0 {
			t.Errorf("reader's %s: local state %v, want keeper's kept from it", c.Hook, c.Context.State)
		}
	}
	if n := len(reader.Calls()); n != 2 {
		t.Errorf("reader called %d times, want 2", n)
	}
}

// TestMessageStateStaysInItsMessage: in a batch, each message's hooks
// share one context, started afresh from the HTTP hooks' one: nothing a
// plugin kept for one message reaches another's hooks, nor
// http_post_request (which has no message to take it from).
func TestMessageStateStaysInItsMessage(t *testing.T) {
	keeper := plugintest.NewScripted("keeper", stateHooks...)
	keeper.SetFunc(keepState("keeper"))
	reader := plugintest.NewScripted("reader", cpex.ToolPreInvoke, cpex.ToolPostInvoke)
	h := newHarness(t, stateConfig, keeper, reader)
	call := func(id int, tool string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool)
	}
	res := h.do(mcpPost("["+call(1, "one")+","+call(2, "two")+"]", "Authorization", "Bearer user-token"),
		jsonUpstream(http.StatusOK, `[{"jsonrpc":"2.0","id":1,"result":{"content":[]}},{"jsonrpc":"2.0","id":2,"result":{"content":[]}}]`))
	if res.Status != http.StatusOK {
		t.Fatalf("status %d %s", res.Status, res.Body)
	}
	for _, c := range keeper.Calls() {
		var p struct {
			Name       string `json:"name"`
			TargetName string `json:"target_name"`
		}
		_ = json.Unmarshal(c.Payload, &p)
		tool := p.Name + p.TargetName
		for k, v := range c.Context.State {
			s := fmt.Sprint(v)
			if other := map[string]string{"one": "two", "two": "one"}[tool]; other != "" && strings.HasSuffix(s, ":"+other) {
				t.Errorf("%s of %s sees %s=%s, kept for the other message", c.Hook, tool, k, s)
			}
			if tool == "" && c.Hook == cpex.HTTPPostRequest {
				t.Errorf("http_post_request of a batch sees a message's state %s=%s", k, s)
			}
		}
		if c.Hook == cpex.ToolPostInvoke && c.Context.State["keeper.tool_pre_invoke"] != "tool_pre_invoke:"+tool {
			t.Errorf("tool_post_invoke of %s: state %v, want its own pre hook's", tool, c.Context.State)
		}
	}
	if n := keeper.CallCount(); n != 9 {
		t.Errorf("keeper called %d times, want 9 (4 hooks for each tool call, one http_post_request)", n)
	}
}
