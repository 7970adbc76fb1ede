package pluginclient

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

func text(s ...string) []mcp.Content {
	var out []mcp.Content
	for _, t := range s {
		out = append(out, &mcp.TextContent{Text: t})
	}
	return out
}

func TestParseInvokeReply(t *testing.T) {
	tests := []struct {
		name    string
		res     *mcp.CallToolResult
		want    *cpex.InvokeHookReply
		wantErr error
	}{
		{
			name: "text result",
			res:  &mcp.CallToolResult{Content: text(`{"plugin_name":"p","result":{"continue_processing":true}}`)},
			want: &cpex.InvokeHookReply{PluginName: "p", Result: &cpex.PluginResult{ContinueProcessing: ptr(true)}},
		},
		{
			name: "error reply is a reply",
			res:  &mcp.CallToolResult{Content: text(`{"plugin_name":"p","error":{"message":"boom","plugin_name":"p"}}`)},
			want: &cpex.InvokeHookReply{PluginName: "p", Error: &cpex.PluginErrorModel{Message: "boom", PluginName: "p"}},
		},
		{
			name: "structured content only",
			res:  &mcp.CallToolResult{StructuredContent: map[string]any{"plugin_name": "p", "result": map[string]any{}}},
			want: &cpex.InvokeHookReply{PluginName: "p", Result: &cpex.PluginResult{}},
		},
		{
			name: "first JSON text block wins over a note",
			res:  &mcp.CallToolResult{Content: text("note", ` {"plugin_name":"p","result":{}} `)},
			want: &cpex.InvokeHookReply{PluginName: "p", Result: &cpex.PluginResult{}},
		},
		{
			name: "context carried",
			res:  &mcp.CallToolResult{Content: text(`{"plugin_name":"p","result":{},"context":{"state":{"k":1},"metadata":{},"global_context":{"request_id":"r","state":{},"metadata":{}}}}`)},
			want: &cpex.InvokeHookReply{PluginName: "p", Result: &cpex.PluginResult{}, Context: &cpex.PluginContext{
				State: map[string]any{"k": 1.0}, Metadata: map[string]any{},
				GlobalContext: cpex.GlobalContext{RequestID: "r", State: map[string]any{}, Metadata: map[string]any{}},
			}},
		},
		{name: "neither result nor error", res: &mcp.CallToolResult{Content: text(`{"plugin_name":"p"}`)}, wantErr: ErrInvalidReply},
		{name: "null result", res: &mcp.CallToolResult{Content: text(`{"plugin_name":"p","result":null}`)}, wantErr: ErrInvalidReply},
		{name: "not JSON", res: &mcp.CallToolResult{Content: text("hello")}, wantErr: ErrInvalidReply},
		{name: "JSON array", res: &mcp.CallToolResult{Content: text(`[1]`)}, wantErr: ErrInvalidReply},
		{name: "wrong types", res: &mcp.CallToolResult{Content: text(`{"result":{"continue_processing":"yes"}}`)}, wantErr: ErrInvalidReply},
		{name: "no content", res: &mcp.CallToolResult{}, wantErr: ErrInvalidReply},
		{name: "nil", res: nil, wantErr: ErrInvalidReply},
		{name: "tool error", res: &mcp.CallToolResult{IsError: true, Content: text("Error executing tool invoke_hook: boom")}, wantErr: ErrInvalidReply},
		{name: "tool error with JSON text", res: &mcp.CallToolResult{IsError: true, Content: text(`{"plugin_name":"p","result":{}}`)}, wantErr: ErrInvalidReply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseInvokeReply(tt.res)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("reply (-want +got):\n%s", d)
			}
		})
	}
}

// FuzzParseInvokeReply checks that no plugin answer makes the parser panic,
// and that an accepted reply always has a result or an error.
func FuzzParseInvokeReply(f *testing.F) {
	f.Add(`{"plugin_name":"p","result":{"continue_processing":false,"violation":{"reason":"r","description":"d","code":"c"}}}`, false)
	f.Add(`{"plugin_name":"p","error":{"message":"m","plugin_name":"p"}}`, false)
	f.Add(`{}`, true)
	f.Fuzz(func(t *testing.T, s string, isError bool) {
		reply, err := parseInvokeReply(&mcp.CallToolResult{IsError: isError, Content: text(s)})
		if err != nil {
			if !errors.Is(err, ErrInvalidReply) {
				t.Fatalf("error %v does not wrap ErrInvalidReply", err)
			}
			return
		}
		if reply.Result == nil && reply.Error == nil {
			t.Fatalf("accepted reply without result or error: %q", s)
		}
	})
}

// parseRemoteConfig decodes a get_plugin_config result as a client does:
// the MCP session's PluginConfig (configJSON), then the slot's decode.
func parseRemoteConfig(res *mcp.CallToolResult) (config.Plugin, error) {
	raw, found, err := configJSON(res)
	if err != nil {
		return config.Plugin{}, err
	}
	return decodeRemoteConfig(raw, found)
}

func TestParseRemoteConfig(t *testing.T) {
	if _, err := parseRemoteConfig(&mcp.CallToolResult{Content: text(`{}`)}); !errors.Is(err, errNoConfig) {
		t.Errorf("empty config: err = %v, want errNoConfig", err)
	}
	if _, err := parseRemoteConfig(&mcp.CallToolResult{Content: text(`{"priority":"high"}`)}); !errors.Is(err, ErrInvalidReply) {
		t.Errorf("bad types: err = %v, want ErrInvalidReply", err)
	}
	rp, err := parseRemoteConfig(&mcp.CallToolResult{Content: text(`{"name":"P","hooks":["tool_pre_invoke"],"priority":5,"conditions":[{"tools":["a"],"server_ids":["s"]}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if rp.Name != "P" || *rp.Priority != 5 || len(rp.Conditions) != 1 || rp.Conditions[0].Tools[0] != "a" || rp.Conditions[0].ServerIDs[0] != "s" {
		t.Errorf("parsed %+v", rp)
	}
}

func TestParseRemoteConfigIgnoresServerTransport(t *testing.T) {
	// A Python server reports its own transport settings, in shapes we do
	// not model; they must not fail the decode.
	rp, err := parseRemoteConfig(&mcp.CallToolResult{Content: text(
		`{"name":"p","kind":"plugins.pii.PIIFilter","mode":"enforce","mcp":{"proto":"STDIO","reconnect_delay":"soon","tls":7},` +
			`"grpc":{"target":9,"uds":[]},"unix_socket":{"path":false},"namespace":null}`)})
	if err != nil {
		t.Fatal(err)
	}
	if rp.MCP != nil || rp.GRPC != nil || rp.UnixSocket != nil || rp.Mode != "enforce" {
		t.Errorf("parsed %+v", rp)
	}
}

func TestMerge(t *testing.T) {
	mcpCfg := &config.MCP{Proto: "STREAMABLEHTTP", URL: "http://p/mcp"}
	remote := config.Plugin{
		Name:        "RemoteName",
		Kind:        "plugins.pii.PIIFilter",
		Description: "remote description",
		Author:      "remote author",
		Version:     "1.0",
		Tags:        []string{"pii"},
		Hooks:       []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke},
		Mode:        "enforce",
		Priority:    ptr(10),
		Conditions:  []config.Condition{{Tools: []string{"t1"}, TenantIDs: []string{"acme"}}},
		Config:      map[string]any{"threshold": 0.5},
		MCP:         &config.MCP{Proto: "STDIO"},
	}
	tests := []struct {
		name   string
		local  config.Plugin
		remote func(*config.Plugin)
		want   config.Plugin
	}{
		{
			name:  "remote fills what local leaves unset",
			local: config.Plugin{Name: "pii", Kind: "external", MCP: mcpCfg},
			want: config.Plugin{
				Name: "pii", Kind: "external", MCP: mcpCfg,
				Description: "remote description", Author: "remote author", Version: "1.0",
				Tags: []string{"pii"}, Hooks: []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke},
				Mode: config.ModeSequential, Priority: ptr(10),
				Conditions: []config.Condition{{Tools: []string{"t1"}, TenantIDs: []string{"acme"}}},
				Config:     map[string]any{"threshold": 0.5},
			},
		},
		{
			name: "local keys override",
			local: config.Plugin{
				Name: "pii", Kind: "external", MCP: mcpCfg,
				Hooks: []cpex.HookType{cpex.ToolPostInvoke}, Mode: config.ModeAudit, Priority: ptr(1),
				OnError: config.OnErrorIgnore, Conditions: []config.Condition{}, Tags: []string{},
				Description: "local", AppliedTo: map[string]any{"tools": []any{"x"}}, Config: map[string]any{},
			},
			want: config.Plugin{
				Name: "pii", Kind: "external", MCP: mcpCfg,
				Description: "local", Author: "remote author", Version: "1.0",
				Tags: []string{}, Hooks: []cpex.HookType{cpex.ToolPostInvoke},
				Mode: config.ModeAudit, Priority: ptr(1), OnError: config.OnErrorIgnore,
				Conditions: []config.Condition{}, AppliedTo: map[string]any{"tools": []any{"x"}},
				Config: map[string]any{},
			},
		},
		{
			name:   "remote enforce_ignore_error implies on_error ignore",
			local:  config.Plugin{Name: "pii", Kind: "external", MCP: mcpCfg},
			remote: func(p *config.Plugin) { p.Mode = "Enforce_Ignore_Error" },
			want: config.Plugin{
				Name: "pii", Kind: "external", MCP: mcpCfg,
				Description: "remote description", Author: "remote author", Version: "1.0",
				Tags: []string{"pii"}, Hooks: []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke},
				Mode: config.ModeSequential, OnError: config.OnErrorIgnore, Priority: ptr(10),
				Conditions: []config.Condition{{Tools: []string{"t1"}, TenantIDs: []string{"acme"}}},
				Config:     map[string]any{"threshold": 0.5},
			},
		},
		{
			name:   "remote permissive with explicit on_error",
			local:  config.Plugin{Name: "pii", Kind: "external", MCP: mcpCfg},
			remote: func(p *config.Plugin) { p.Mode, p.OnError = "permissive", "FAIL" },
			want: config.Plugin{
				Name: "pii", Kind: "external", MCP: mcpCfg,
				Description: "remote description", Author: "remote author", Version: "1.0",
				Tags: []string{"pii"}, Hooks: []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke},
				Mode: config.ModeTransform, OnError: config.OnErrorFail, Priority: ptr(10),
				Conditions: []config.Condition{{Tools: []string{"t1"}, TenantIDs: []string{"acme"}}},
				Config:     map[string]any{"threshold": 0.5},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := remote
			if tt.remote != nil {
				tt.remote(&r)
			}
			if d := cmp.Diff(tt.want, merge(tt.local, r)); d != "" {
				t.Errorf("merge (-want +got):\n%s", d)
			}
		})
	}
}
