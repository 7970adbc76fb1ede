package cpex

import "testing"

// TestDispatched: the sidecar runs each hook of the table once, at one
// moment; every one is a hook cpex knows; the family pairs run per message
// and per result; the aliases and the hooks it never runs are not there.
func TestDispatched(t *testing.T) {
	seen := map[HookType]Dispatch{}
	for h, when := range Dispatched() {
		if _, dup := seen[h]; dup {
			t.Errorf("%s listed twice", h)
		}
		seen[h] = when
		if !KnownHook(h) {
			t.Errorf("%s is dispatched but not a known hook", h)
		}
		if got, ok := DispatchOf(h); !ok || got != when {
			t.Errorf("DispatchOf(%s) = %d, %v; want %d", h, got, ok, when)
		}
	}
	for i, h := range MCPHooks {
		want := PerMessage
		if i%2 == 1 {
			want = PerResult
		}
		if seen[h] != want {
			t.Errorf("%s dispatched at %d, want %d", h, seen[h], want)
		}
	}
	for _, h := range []HookType{"agent_pre_invoke", "evaluate", "elicit", CMFLLMInput, "cmf.tool_pre_invoke", "prompt_pre_invoke"} {
		if _, ok := DispatchOf(h); ok {
			t.Errorf("%s is dispatched; the sidecar never runs it by that name", h)
		}
	}
	if len(seen) != 15 {
		t.Errorf("%d hooks dispatched, want 15: a new hook needs its row here and in the processor", len(seen))
	}
}
