package cpex

import (
	"slices"
	"testing"
	"time"
)

// TestCanonicalHook: every name cpex accepts for a hook maps to the hook
// the sidecar runs; the bare hooks and the hooks with no bare form map to
// themselves.
func TestCanonicalHook(t *testing.T) {
	for _, tc := range []struct {
		in, want HookType
	}{
		{"cmf.tool_pre_invoke", ToolPreInvoke},
		{"cmf.tool_post_invoke", ToolPostInvoke},
		{"cmf.prompt_pre_fetch", PromptPreFetch},
		{"cmf.prompt_post_fetch", PromptPostFetch},
		{"cmf.resource_pre_fetch", ResourcePreFetch},
		{"cmf.resource_post_fetch", ResourcePostFetch},
		{"cmf.prompt_pre_invoke", PromptPreFetch},
		{"cmf.prompt_post_invoke", PromptPostFetch},
		{"prompt_pre_invoke", PromptPreFetch},
		{"prompt_post_invoke", PromptPostFetch},
		{ToolPreInvoke, ToolPreInvoke},
		{HTTPPreRequest, HTTPPreRequest},
		{CMFLLMInput, CMFLLMInput},
		{CMFLLMOutput, CMFLLMOutput},
		{"cmf.agent_pre_invoke", "cmf.agent_pre_invoke"}, // not a cpex name: left as is
		{"CMF.tool_pre_invoke", "CMF.tool_pre_invoke"},   // cpex names are case-sensitive
	} {
		if got := CanonicalHook(tc.in); got != tc.want {
			t.Errorf("CanonicalHook(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestKnownHookAliases: aliases and the CMF hooks with no bare form are
// known; an alias always maps to a hook that is itself known and not an
// alias, so one lookup is enough.
func TestKnownHookAliases(t *testing.T) {
	for _, h := range []HookType{"cmf.tool_pre_invoke", "prompt_post_invoke", CMFLLMInput, "evaluate", "elicit", ToolsPostList} {
		if !KnownHook(h) {
			t.Errorf("KnownHook(%q) = false", h)
		}
	}
	for _, h := range []HookType{"cmf.unknown", "tool_post_list", ""} {
		if KnownHook(h) {
			t.Errorf("KnownHook(%q) = true", h)
		}
	}
	for _, a := range HookAliases() {
		if !slices.Contains(knownHooks[:], a.Hook) || CanonicalHook(a.Hook) != a.Hook {
			t.Errorf("alias %q maps to %q, which is not a bare known hook", a.Alias, a.Hook)
		}
		if !slices.Contains(KnownHooks(), a.Alias) {
			t.Errorf("KnownHooks lacks alias %q", a.Alias)
		}
	}
}

func TestCanonicalHooks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in, want []HookType
	}{
		{"nil", nil, nil},
		{"empty", []HookType{}, []HookType{}},
		{"aliases", []HookType{"cmf.tool_pre_invoke", "prompt_pre_invoke"}, []HookType{ToolPreInvoke, PromptPreFetch}},
		{"alias and hook run once", []HookType{ToolPreInvoke, "cmf.tool_pre_invoke", "cmf.prompt_post_invoke", PromptPostFetch}, []HookType{ToolPreInvoke, PromptPostFetch}},
		{"unknown kept", []HookType{"nope", CMFLLMOutput}, []HookType{"nope", CMFLLMOutput}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CanonicalHooks(tc.in)
			if !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Errorf("CanonicalHooks(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestPluginResultRetryDelay: the bound itself.
func TestPluginResultRetryDelay(t *testing.T) {
	for _, tc := range []struct {
		ms   float64
		want time.Duration
	}{
		{0, 0}, {-1, 0}, {0.5, 500 * time.Microsecond}, {250, 250 * time.Millisecond},
		{3600000, time.Hour}, {3600001, time.Hour},
	} {
		r := PluginResult{RetryDelayMS: &tc.ms}
		if got := r.RetryDelay(); got != tc.want {
			t.Errorf("RetryDelay(%v ms) = %v, want %v", tc.ms, got, tc.want)
		}
	}
}
