package processor_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpheaders"
)

const (
	listCall   = `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`
	getEnvCall = `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"get-env","arguments":{}}}`
	guardOnEnv = `
plugins:
  - name: guard
    kind: external
    conditions:
      - tools: [get-env]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
`
	guardNoTrust = oneGuard + `
extproc:
  trust_mcp_method_header: false
`
)

// std returns the MCP 2026-07-28 standard headers of a request for method
// (and name, when not empty), as name, value pairs for mcpPost.
func std(version, method, name string) []string {
	kv := []string{"Mcp-Protocol-Version", version, "Mcp-Method", method}
	if name != "" {
		kv = append(kv, "Mcp-Name", name)
	}
	return kv
}

// TestDecideMessages: per configuration and request, the ext_proc messages
// Envoy sends (what the request-headers reply asked for) and whether the
// plugin ran. Each message is a round trip through Envoy: a request no hook
// can use must cost request headers alone; the response headers are asked
// for only when a post hook may apply.
func TestDecideMessages(t *testing.T) {
	const (
		rh = "request_headers"
		rb = "request_body"
		sh = "response_headers"
		sb = "response_body"
	)
	tests := []struct {
		name  string
		yaml  string
		hooks []cpex.HookType
		body  string
		kv    []string
		want  []string
		calls int
	}{
		{"pre only, tools/list: no response headers", oneGuard, []cpex.HookType{cpex.ToolPreInvoke}, listCall, nil,
			[]string{rh, rb}, 0},
		{"pre only, tools/call: body, no response headers", oneGuard, []cpex.HookType{cpex.ToolPreInvoke}, echoCall, nil,
			[]string{rh, rb}, 1},
		{"pre+post, tools/list without headers: body and response headers", oneGuard, []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke}, listCall, nil,
			[]string{rh, rb, sh}, 0},
		{"pre+post, tools/list, 2026-07-28 headers: headers only", oneGuard, []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke}, listCall,
			std("2026-07-28", "tools/list", ""), []string{rh}, 0},
		{"pre+post, tools/list, a later version: headers only", oneGuard, []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke}, listCall,
			std("2027-01-01", "tools/list", ""), []string{rh}, 0},
		{"pre+post, tools/list, 2025-11-25 declared: the headers decide nothing", oneGuard, []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke}, listCall,
			std("2025-11-25", "tools/list", ""), []string{rh, rb, sh}, 0},
		{"pre+post, tools/list, headers not trusted", guardNoTrust, []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke}, listCall,
			std("2026-07-28", "tools/list", ""), []string{rh, rb, sh}, 0},
		{"pre+post, Mcp-Method twice: not trusted", oneGuard, []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke}, listCall,
			append(std("2026-07-28", "tools/list", ""), "Mcp-Method", "tools/list"), []string{rh, rb, sh}, 0},
		{"pre+post, tools/call, 2026-07-28: everything", oneGuard, []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke}, echoCall,
			std("2026-07-28", "tools/call", "echo"), []string{rh, rb, sh, sb}, 2},
		{"post only, tools/call, 2026-07-28: body and response", oneGuard, []cpex.HookType{cpex.ToolPostInvoke}, echoCall,
			std("2026-07-28", "tools/call", "echo"), []string{rh, rb, sh, sb}, 1},
		{"pre only, conditions miss on Mcp-Name: headers only", guardOnEnv, []cpex.HookType{cpex.ToolPreInvoke}, echoCall,
			std("2026-07-28", "tools/call", "echo"), []string{rh}, 0},
		{"pre only, conditions match on Mcp-Name", guardOnEnv, []cpex.HookType{cpex.ToolPreInvoke}, getEnvCall,
			std("2026-07-28", "tools/call", "get-env"), []string{rh, rb}, 1},
		{"pre only, conditions match on a Base64 Mcp-Name", guardOnEnv, []cpex.HookType{cpex.ToolPreInvoke}, getEnvCall,
			std("2026-07-28", "tools/call", "=?base64?Z2V0LWVudg==?="), []string{rh, rb}, 1},
		{"pre only, conditions miss, no headers: the body decides", guardOnEnv, []cpex.HookType{cpex.ToolPreInvoke}, echoCall, nil,
			[]string{rh, rb}, 0},
		{"prompt hooks only, tools/call, 2026-07-28: headers only", oneGuard, []cpex.HookType{cpex.PromptPreFetch, cpex.PromptPostFetch}, echoCall,
			std("2026-07-28", "tools/call", "echo"), []string{rh}, 0},
		{"prompt hooks only, tools/call without headers", oneGuard, []cpex.HookType{cpex.PromptPreFetch, cpex.PromptPostFetch}, echoCall, nil,
			[]string{rh, rb, sh}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			guard := plugintest.NewScripted("guard", tt.hooks...)
			h := newHarness(t, tt.yaml, guard)
			var id = `3`
			if tt.body == listCall {
				id = `5`
			} else if tt.body == getEnvCall {
				id = `6`
			}
			res := h.do(mcpPost(tt.body, tt.kv...), jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[]}}`))
			if got := kinds(res.Sent); !slices.Equal(got, tt.want) {
				t.Errorf("messages %v, want %v", got, tt.want)
			}
			if res.UpstreamRequest == nil || res.Status != http.StatusOK {
				t.Errorf("status %d, upstream reached %v", res.Status, res.UpstreamRequest != nil)
			}
			if n := guard.CallCount(); n != tt.calls {
				t.Errorf("plugin called %d times, want %d", n, tt.calls)
			}
		})
	}
}

// TestDecideHeaderSaysNoHookButBodyDoes: with trusted headers, a request
// whose Mcp-Method names a method no hook has passes without inspection even
// if its body holds a hooked call — the documented trade-off of
// trust_mcp_method_header (a conforming server refuses the mismatch). Turned
// off, the body is read, and the sidecar refuses the mismatch itself (HTTP
// 400, -32020) before any plugin or the server sees the request.
func TestDecideHeaderSaysNoHookButBodyDoes(t *testing.T) {
	for _, trust := range []bool{true, false} {
		yaml := oneGuard
		if !trust {
			yaml = guardNoTrust
		}
		guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
		h := newHarness(t, yaml, guard)
		res := h.do(mcpPost(echoCall, std(mcpheaders.StandardHeadersVersion, "tools/list", "")...),
			jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{}}`))
		if n := guard.CallCount(); n != 0 {
			t.Errorf("trust %v: plugin called %d times, want 0", trust, n)
		}
		if reached := res.UpstreamRequest != nil; reached != trust {
			t.Errorf("trust %v: upstream reached %v (status %d)", trust, reached, res.Status)
		}
		if !trust && res.Status != http.StatusBadRequest {
			t.Errorf("trust false: status %d, want 400 (header mismatch)", res.Status)
		}
	}
}
