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
		hooks                             []cpex.HookType
		atHeaders, atBody, post, listHook bool
	}{
		{hooks: nil},
		{hooks: []cpex.HookType{cpex.ToolPreInvoke}, atBody: true},
		{hooks: []cpex.HookType{cpex.ToolPostInvoke}, atBody: true, post: true},
		{hooks: []cpex.HookType{cpex.ResourcePostFetch}, atBody: true, post: true},
		{hooks: []cpex.HookType{cpex.HTTPAuthCheckPermission}, atBody: true},
		{hooks: []cpex.HookType{cpex.TokenDelegate}, atBody: true},
		{hooks: []cpex.HookType{cpex.HTTPPreRequest}, atHeaders: true},
		{hooks: []cpex.HookType{cpex.HTTPPostRequest}, atHeaders: true},
		{hooks: []cpex.HookType{cpex.IdentityResolve}, atHeaders: true},
		{hooks: []cpex.HookType{cpex.ToolsPostList}, atBody: true, post: true, listHook: true},
	} {
		h := &changingHooks{has: map[cpex.HookType]bool{}}
		for _, hook := range tc.hooks {
			h.has[hook] = true
		}
		f := hookFactsOf(&Snapshot{Hooks: h})
		if f.atHeaders != tc.atHeaders || f.atBody != tc.atBody || f.post != tc.post || f.listHook != tc.listHook {
			t.Errorf("%v: atHeaders %v atBody %v post %v listHook %v, want %v %v %v %v", tc.hooks,
				f.atHeaders, f.atBody, f.post, f.listHook, tc.atHeaders, tc.atBody, tc.post, tc.listHook)
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
