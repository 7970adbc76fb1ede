package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// TestHookWarnings: the hooks the sidecar runs load without a warning, the
// ones it cannot run (agent_*) warn by name, and identity_resolve and
// token_delegate warn where cpex cannot answer them (gRPC, Unix socket).
func TestHookWarnings(t *testing.T) {
	const mcp = "  mcp: {proto: STREAMABLEHTTP, url: 'http://a/mcp'}\n"
	const grpc = "  grpc: {target: 'a:50051'}\n"
	for _, tc := range []struct {
		hook, transport string
		warn            string // "" for none
	}{
		{"http_pre_request", mcp, ""},
		{"http_post_request", mcp, ""},
		{"http_auth_resolve_user", mcp, ""},
		{"http_auth_check_permission", mcp, ""},
		{"token_delegate", mcp, ""},
		{"token_delegate", grpc, "use mcp"},
		{"identity_resolve", mcp, ""},
		{"identity_resolve", grpc, "use mcp"},
		{"agent_pre_invoke", mcp, "never fires"},
		{"evaluate", mcp, "never fires"},
		{"cmf.llm_input", mcp, "never runs"},
		{"cmf.llm_output", mcp, "never runs"},
		{"cmf.tool_pre_invoke", mcp, ""},
		{"prompt_post_invoke", mcp, ""},
	} {
		t.Run(tc.hook, func(t *testing.T) {
			c, err := Parse([]byte("plugins:\n- name: a\n  kind: external\n  hooks: ["+tc.hook+"]\n"+tc.transport), nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			msg, ok := wheres(c.Warnings)[where{"a", "hooks[0]"}]
			if ok != (tc.warn != "") || !strings.Contains(msg, tc.warn) {
				t.Errorf("warning %q (present %v), want one containing %q", msg, ok, tc.warn)
			}
		})
	}
}

// TestHookAliases: cpex's other names for a hook load as that hook, so the
// executor dispatches the plugin on it; an alias and its hook listed
// together run once.
func TestHookAliases(t *testing.T) {
	for _, tc := range []struct {
		hooks string
		want  []cpex.HookType
	}{
		{"[cmf.tool_pre_invoke, cmf.tool_post_invoke]", []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke}},
		{"[cmf.prompt_pre_fetch, cmf.prompt_post_fetch]", []cpex.HookType{cpex.PromptPreFetch, cpex.PromptPostFetch}},
		{"[cmf.resource_pre_fetch, cmf.resource_post_fetch]", []cpex.HookType{cpex.ResourcePreFetch, cpex.ResourcePostFetch}},
		{"[cmf.prompt_pre_invoke, cmf.prompt_post_invoke]", []cpex.HookType{cpex.PromptPreFetch, cpex.PromptPostFetch}},
		{"[prompt_pre_invoke, prompt_post_invoke]", []cpex.HookType{cpex.PromptPreFetch, cpex.PromptPostFetch}},
		{"[tool_pre_invoke, cmf.tool_pre_invoke]", []cpex.HookType{cpex.ToolPreInvoke}},
		{"[cmf.llm_input]", []cpex.HookType{cpex.CMFLLMInput}},
	} {
		t.Run(tc.hooks, func(t *testing.T) {
			c, err := Parse([]byte("plugins:\n- name: a\n  kind: external\n  hooks: "+tc.hooks+"\n  mcp: {proto: STREAMABLEHTTP, url: 'http://a/mcp'}\n"), nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := c.Plugins[0].Hooks; !slices.Equal(got, tc.want) {
				t.Errorf("hooks = %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := Parse([]byte("plugins:\n- name: a\n  kind: external\n  hooks: [cmf.tool_pre_invok]\n  mcp: {proto: STREAMABLEHTTP, url: 'http://a/mcp'}\n"), nil); err == nil || !strings.Contains(err.Error(), "unknown hook") {
		t.Errorf("misspelt alias: err = %v, want unknown hook", err)
	}
}
