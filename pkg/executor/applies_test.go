package executor

import (
	"slices"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
)

// TestAppliesTo: conditions decide before any payload is built; when no
// plugin runs, each plugin of the hook is counted as skipped.
func TestAppliesTo(t *testing.T) {
	onlyA := plug("a", config.ModeSequential, 10, cpex.ToolPreInvoke)
	onlyA.Conditions = []config.Condition{{Tools: []string{"alpha"}}}
	tenant := plug("t", config.ModeSequential, 20, cpex.ToolPreInvoke)
	tenant.Conditions = []config.Condition{{TenantIDs: []string{"acme"}}}
	rec := &recorder{}
	e := newExec(t, newFake(onlyA, tenant), Options{Observer: rec})

	tests := []struct {
		name   string
		hook   cpex.HookType
		g      cpex.GlobalContext
		target Target
		want   bool
		skips  []string
	}{
		{name: "tool matches", hook: cpex.ToolPreInvoke, target: hookfamily.TargetOf(cpex.ToolPreInvoke, "alpha"), want: true},
		{name: "tenant matches", hook: cpex.ToolPreInvoke, g: cpex.GlobalContext{TenantID: "acme"}, target: hookfamily.TargetOf(cpex.ToolPreInvoke, "beta"), want: true},
		{name: "nothing matches", hook: cpex.ToolPreInvoke, target: hookfamily.TargetOf(cpex.ToolPreInvoke, "beta"), want: false, skips: []string{"a:skipped", "t:skipped"}},
		{name: "hook without plugins", hook: cpex.PromptPreFetch, target: hookfamily.TargetOf(cpex.PromptPreFetch, "p"), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(rec.outcomes())
			if got := e.AppliesTo(tt.hook, &tt.g, tt.target); got != tt.want {
				t.Fatalf("AppliesTo = %v, want %v", got, tt.want)
			}
			if got := rec.outcomes()[before:]; !slices.Equal(got, tt.skips) && (len(got) != 0 || len(tt.skips) != 0) {
				t.Errorf("observed %v, want %v", got, tt.skips)
			}
		})
	}
}
