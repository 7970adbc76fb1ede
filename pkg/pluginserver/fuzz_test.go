package pluginserver_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// FuzzInvoke checks that any invoke_hook arguments give exactly one of
// result and error, never a panic, and a reply that marshals.
func FuzzInvoke(f *testing.F) {
	f.Add(`{"hook_type":"tool_pre_invoke","plugin_name":"denylist","payload":{"name":"x"},"context":{}}`)
	srv := pluginserver.New(pluginserver.Func(pluginserver.Config{Name: "DenyList"},
		func(_ context.Context, _ cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			var p cpex.ToolPreInvokePayload
			if err := json.Unmarshal(payload, &p); err != nil {
				return nil, err
			}
			if p.Name == "block" {
				return pluginserver.Block("", cpex.PluginViolation{Reason: "r", Code: "C"}), nil
			}
			return pluginserver.Modify("", p)
		}))
	f.Fuzz(func(t *testing.T, args string) {
		reply := srv.Invoke(context.Background(), json.RawMessage(args))
		if (reply.Result == nil) == (reply.Error == nil) {
			t.Fatalf("reply %+v: want exactly one of result and error", reply)
		}
		if reply.Error != nil && reply.Error.PluginName != reply.PluginName {
			t.Fatalf("error plugin_name %q, reply plugin_name %q", reply.Error.PluginName, reply.PluginName)
		}
		if _, err := json.Marshal(reply); err != nil {
			t.Fatalf("marshal reply: %v", err)
		}
	})
}
