package processor

import (
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// changingHooks has the hooks of has; its Version is version.
type changingHooks struct {
	fakeHooks
	has     map[cpex.HookType]bool
	version uint64
	asked   int // Applies calls
}

func (h *changingHooks) Applies(hook cpex.HookType) bool { h.asked++; return h.has[hook] }
func (h *changingHooks) Version() uint64                 { return h.version }

func TestHookFactsOf(t *testing.T) {
	for _, tc := range []struct {
		hooks []cpex.HookType
		want  hookFacts // its facts but snap and version
	}{
		{hooks: nil},
		{[]cpex.HookType{cpex.ToolPreInvoke}, hookFacts{atBody: true}},
		{[]cpex.HookType{cpex.ToolPostInvoke}, hookFacts{atBody: true, post: true}},
		{[]cpex.HookType{cpex.ResourcePostFetch}, hookFacts{atBody: true, post: true}},
		{[]cpex.HookType{cpex.HTTPAuthCheckPermission}, hookFacts{atBody: true, permission: true}},
		{[]cpex.HookType{cpex.TokenDelegate}, hookFacts{atBody: true, delegate: true}},
		{[]cpex.HookType{cpex.HTTPPreRequest}, hookFacts{atHeaders: true}},
		{[]cpex.HookType{cpex.HTTPPostRequest}, hookFacts{atHeaders: true}},
		{[]cpex.HookType{cpex.IdentityResolve}, hookFacts{atHeaders: true}},
		{[]cpex.HookType{cpex.ToolsPostList}, hookFacts{atBody: true, post: true, listHook: true}},
	} {
		h := &changingHooks{has: map[cpex.HookType]bool{}}
		for _, hook := range tc.hooks {
			h.has[hook] = true
		}
		got := *hookFactsOf(&Snapshot{Hooks: h})
		got.snap, got.version = nil, 0
		if got != tc.want {
			t.Errorf("%v: %+v, want %+v", tc.hooks, got, tc.want)
		}
	}
}

// The facts are asked once per snapshot and disable, not per stream.
func TestFactsCacheFollowsVersion(t *testing.T) {
	h := &changingHooks{has: map[cpex.HookType]bool{cpex.ToolPostInvoke: true}, version: 1}
	var c factsCache
	snap := &Snapshot{Hooks: h}
	if !c.of(snap).post {
		t.Fatal("post hook not seen")
	}
	asked := h.asked
	for range 3 {
		c.of(snap)
	}
	if h.asked != asked {
		t.Errorf("Applies asked %d more times with the same Version", h.asked-asked)
	}
	h.has[cpex.ToolPostInvoke] = false // disabled at run time
	h.version++
	if c.of(snap).post {
		t.Error("post hook still seen after the Version changed")
	}
	other := &changingHooks{has: map[cpex.HookType]bool{cpex.HTTPPreRequest: true}, version: h.version}
	if f := c.of(&Snapshot{Hooks: other}); !f.atHeaders || f.post {
		t.Errorf("a reloaded snapshot whose plugins have the same Version got the old facts: %+v", f)
	}
}
