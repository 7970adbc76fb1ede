package sidecar_test

import (
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// TestBuiltinInChain: a built-in plugin (deny_filter, in ContextForge's
// form) runs in the sidecar's process in one chain with an external
// plugin, ordered by priority, counted by the same metrics.
func TestBuiltinInChain(t *testing.T) {
	guard := plugintest.NewScripted("Guard", cpex.ToolPreInvoke)
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, guard)
	deny := `  - name: DenyListPlugin
    kind: plugins.deny_filter.deny.DenyListPlugin
    hooks: [tool_pre_invoke]
    mode: enforce
    priority: 10
    config:
      words: [innovative, groundbreaking]
`
	sc := startSidecar(t, writeConfig(t, configYAML(deny, pluginEntry("Guard", srv.URL(), "fail", ""))), nil)
	sc.waitReady("Guard", "DenyListPlugin")

	e := refusal(t, sc.call("search", map[string]any{"q": "an Innovative idea"}))
	if !strings.Contains(string(e.Data), `"plugin_name":"DenyListPlugin"`) && !strings.Contains(e.Message+string(e.Data), "DenyListPlugin") {
		t.Errorf("refusal %+v does not name the plugin", e)
	}
	passed(t, sc.call("search", map[string]any{"q": "a plain idea"}))

	m := sc.scrape()
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"plugin", "DenyListPlugin", "hook", "tool_pre_invoke", "outcome", "block"}, 1},
		{[]string{"plugin", "DenyListPlugin", "hook", "tool_pre_invoke", "outcome", "allow"}, 1},
		// The deny list ran first (priority 10): the blocked call never
		// reached the external plugin.
		{[]string{"plugin", "Guard", "hook", "tool_pre_invoke", "outcome", "allow"}, 1},
	} {
		if got := m.value("mcp_extproc_plugin_invocations_total", c.labels...); got != c.want {
			t.Errorf("plugin_invocations_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
}
