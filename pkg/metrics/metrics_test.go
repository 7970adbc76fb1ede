package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/metrics"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
)

// plugins answers every invocation of one plugin the same way.
type plugins struct {
	plugin config.Plugin
	reply  *cpex.InvokeHookReply
	err    error
}

func (p *plugins) Invoke(context.Context, string, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	return p.reply, p.err
}

func (p *plugins) Effective() (uint64, []config.Plugin) { return 1, []config.Plugin{p.plugin} }

// TestInvocationOutcomeLabels runs one hook through the executor with the
// metrics as its observer and reads plugin_invocations_total back: a
// violation that did not block (whatever the mode that kept it from
// blocking) is never counted as "block", and a reply
// the plugin client found unusable is "invalid", not "error".
func TestInvocationOutcomeLabels(t *testing.T) {
	no := false
	violation := &cpex.PluginViolation{Reason: "r", Code: "C"}
	blocking := &cpex.InvokeHookReply{Result: &cpex.PluginResult{ContinueProcessing: &no, Violation: violation}}
	tests := []struct {
		name  string
		mode  config.Mode
		reply *cpex.InvokeHookReply
		err   error
		want  string
	}{
		{"sequential block", config.ModeSequential, blocking, nil, "block"},
		{"audit violation", config.ModeAudit, blocking, nil, "violation_not_enforced"},
		{"transform violation", config.ModeTransform, blocking, nil, "violation_not_enforced"},
		{"fire_and_forget violation", config.ModeFireAndForget, blocking, nil, "violation_not_enforced"},
		{"continue_processing true", config.ModeSequential, &cpex.InvokeHookReply{Result: &cpex.PluginResult{Violation: violation}}, nil, "violation_not_enforced"},
		{"allowed", config.ModeSequential, &cpex.InvokeHookReply{Result: &cpex.PluginResult{}}, nil, "allow"},
		{"plugin-reported error", config.ModeSequential, &cpex.InvokeHookReply{Error: &cpex.PluginErrorModel{Message: "boom"}}, nil, "error"},
		{"transport error", config.ModeSequential, nil, fmt.Errorf("dial: connection refused"), "error"},
		{"invalid reply from the client", config.ModeSequential, nil, fmt.Errorf("%w: tool error: boom", pluginclient.ErrInvalidReply), "invalid"},
		{"reply without result or error", config.ModeSequential, &cpex.InvokeHookReply{}, nil, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := metrics.New(reg)
			prio := 1
			p := &plugins{plugin: config.Plugin{Name: "P", Kind: "external", Mode: tt.mode, Priority: &prio,
				OnError: config.OnErrorIgnore, Hooks: []cpex.HookType{cpex.ToolPreInvoke}}, reply: tt.reply, err: tt.err}
			e := executor.New(p, executor.Options{Observer: m})
			e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(`{"name":"t","args":{}}`), nil, executor.Target{})
			if err := e.Close(context.Background()); err != nil { // waits for fire_and_forget work
				t.Fatal(err)
			}
			for _, label := range []string{"allow", "modify", "block", "violation_not_enforced", "error", "invalid"} {
				want := 0.0
				if label == tt.want {
					want = 1
				}
				if got := invocations(t, reg, label); got != want {
					t.Errorf("outcome=%q: %v, want %v", label, got, want)
				}
			}
		})
	}
}

// invocations returns plugin_invocations_total{plugin="P",outcome=outcome}.
func invocations(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "mcp_extproc_plugin_invocations_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["plugin"] == "P" && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
