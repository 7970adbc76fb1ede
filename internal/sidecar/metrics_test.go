package sidecar_test

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/buildinfo"
	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// TestMetrics drives scripted traffic through the sidecar and checks that
// every counter moved by exactly the traffic's amount.
func TestMetrics(t *testing.T) {
	guard := plugintest.NewScripted("Guard", cpex.ToolPreInvoke)
	guard.SetFunc(byTool(map[string]pluginserver.HookFunc{
		"block":  plugintest.Block(cpex.PluginViolation{Reason: "denied", Description: "tool denied", Code: "DENY"}),
		"modify": plugintest.Replace(cpex.ToolPreInvokePayload{Name: "modify", Args: json.RawMessage(`{"x":"changed"}`)}),
		"fail":   plugintest.Fail(cpex.PluginErrorModel{Message: "boom", Code: "E"}),
	}))
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, guard)
	path := writeConfig(t, configYAML(pluginEntry("Guard", srv.URL(), "fail",
		"    conditions:\n      - tools: [allow, block, modify, fail, again]\n")))
	sc := startSidecar(t, path, nil)
	sc.waitReady("Guard")

	before := sc.scrape()
	callsBefore := guard.CallCount()

	passed(t, sc.call("allow", map[string]any{"x": "a"}))
	if e := refusal(t, sc.call("block", nil)); e.Code != -32000 || !strings.Contains(string(e.Data), "Guard") {
		t.Errorf("block: got error %+v, want code -32000 naming Guard", e)
	}
	seen := make(chan *envoytest.UpstreamRequest, 1)
	res := sc.exchange(mcpPost(toolCall("modify", map[string]any{"x": "original"})), upstream(seen, nil, nil))
	passed(t, res)
	if up := <-seen; !strings.Contains(string(up.Body), `"changed"`) || strings.Contains(string(up.Body), "original") {
		t.Errorf("modify: upstream got %s, want the plugin's arguments", up.Body)
	}
	if e := refusal(t, sc.call("fail", nil)); e.Code != -32603 || !strings.Contains(e.Message, "Guard") {
		t.Errorf("fail: got error %+v, want code -32603 naming Guard", e)
	}
	passed(t, sc.call("excluded", nil))

	// A plugin restart: the pool rebuilds the session, either when the next
	// call finds it gone (and retries it once) or, first, when the pinned
	// connection's close says so; no call fails.
	srv.Restart()
	passed(t, sc.call("again", nil))

	sc.waitMetric(0, "mcp_extproc_streams_open")
	after := sc.scrape()
	const requests = 6
	want := []struct {
		name   string
		labels []string
		delta  float64
	}{
		{"mcp_extproc_plugin_invocations_total", []string{"plugin", "Guard", "hook", "tool_pre_invoke", "outcome", "allow"}, 2},
		{"mcp_extproc_plugin_invocations_total", []string{"plugin", "Guard", "hook", "tool_pre_invoke", "outcome", "block"}, 1},
		{"mcp_extproc_plugin_invocations_total", []string{"plugin", "Guard", "hook", "tool_pre_invoke", "outcome", "modify"}, 1},
		{"mcp_extproc_plugin_invocations_total", []string{"plugin", "Guard", "hook", "tool_pre_invoke", "outcome", "error"}, 1},
		{"mcp_extproc_plugin_invocations_total", []string{"plugin", "Guard", "hook", "tool_pre_invoke", "outcome", "skipped"}, 1},
		{"mcp_extproc_plugin_invocations_total", nil, 6},
		{"mcp_extproc_plugin_invocation_duration_seconds", []string{"plugin", "Guard", "hook", "tool_pre_invoke"}, 5},
		{"mcp_extproc_immediate_responses_total", []string{"reason", "blocked"}, 1},
		{"mcp_extproc_immediate_responses_total", []string{"reason", "plugin_error"}, 1},
		{"mcp_extproc_immediate_responses_total", nil, 2},
		{"mcp_extproc_messages_total", []string{"type", "request_headers"}, requests},
		{"mcp_extproc_messages_total", []string{"type", "request_body"}, requests},
		// No post hook: the response headers are not asked for.
		{"mcp_extproc_messages_total", []string{"type", "response_headers"}, 0},
		{"mcp_extproc_messages_total", nil, 2 * requests},
		{"mcp_extproc_mode_overrides_total", []string{"mode", "request_buffered_only"}, requests},
		{"mcp_extproc_mode_overrides_total", nil, requests},
		{"mcp_extproc_bodies_inspected_total", []string{"direction", "request"}, requests},
		{"mcp_extproc_bodies_inspected_total", nil, requests},
		{"mcp_extproc_plugin_session_rebuilds_total", []string{"plugin", "Guard"}, 1},
		{"mcp_extproc_plugin_retries_total", []string{"plugin", "Guard", "result", "failed"}, 0},
		{"mcp_extproc_config_reloads_total", nil, 0},
	}
	for _, w := range want {
		if got := after.value(w.name, w.labels...) - before.value(w.name, w.labels...); got != w.delta {
			t.Errorf("%s%v moved by %v, want %v", w.name, w.labels, got, w.delta)
		}
	}
	// The histogram counts exactly the invocations that reached the plugin.
	reached := float64(guard.CallCount() - callsBefore)
	if got := after.value("mcp_extproc_plugin_invocation_duration_seconds", "plugin", "Guard") -
		before.value("mcp_extproc_plugin_invocation_duration_seconds", "plugin", "Guard"); got != reached {
		t.Errorf("duration histogram counted %v invocations, the plugin received %v", got, reached)
	}

	gauges := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"mcp_extproc_plugin_state", []string{"plugin", "Guard", "state", "ready"}, 1},
		{"mcp_extproc_plugin_state", []string{"plugin", "Guard", "state", "down"}, 0},
		{"mcp_extproc_plugin_state", []string{"plugin", "Guard", "state", "connecting"}, 0},
		{"mcp_extproc_plugin_circuit_open", []string{"plugin", "Guard"}, 0},
		{"mcp_extproc_streams_open", nil, 0},
		{"mcp_extproc_build_info", []string{"version", buildinfo.Version(), "commit", buildinfo.Commit(), "goversion", runtime.Version()}, 1},
	}
	for _, g := range gauges {
		if !after.has(g.name, g.labels...) {
			t.Errorf("%s%v missing", g.name, g.labels)
		} else if got := after.value(g.name, g.labels...); got != g.want {
			t.Errorf("%s%v = %v, want %v", g.name, g.labels, got, g.want)
		}
	}
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "mcp_extproc_config_last_applied_timestamp_seconds"} {
		if !after.has(name) {
			t.Errorf("%s missing from /metrics", name)
		}
	}
	// Labels never carry request data.
	for name, f := range after {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v := lp.GetValue(); v == "original" || v == "changed" || v == "excluded" || v == "allow" && lp.GetName() != "outcome" {
					t.Errorf("%s has label %s=%q from request data", name, lp.GetName(), v)
				}
			}
		}
	}
}
