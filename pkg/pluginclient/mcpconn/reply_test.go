package mcpconn

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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
			want: &cpex.InvokeHookReply{PluginName: "p", Result: &cpex.PluginResult{ContinueProcessing: new(true)}},
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
		{name: "neither result nor error", res: &mcp.CallToolResult{Content: text(`{"plugin_name":"p"}`)}, wantErr: cpex.ErrInvalidReply},
		{name: "null result", res: &mcp.CallToolResult{Content: text(`{"plugin_name":"p","result":null}`)}, wantErr: cpex.ErrInvalidReply},
		{name: "not JSON", res: &mcp.CallToolResult{Content: text("hello")}, wantErr: cpex.ErrInvalidReply},
		{name: "JSON array", res: &mcp.CallToolResult{Content: text(`[1]`)}, wantErr: cpex.ErrInvalidReply},
		{name: "wrong types", res: &mcp.CallToolResult{Content: text(`{"result":{"continue_processing":"yes"}}`)}, wantErr: cpex.ErrInvalidReply},
		{name: "no content", res: &mcp.CallToolResult{}, wantErr: cpex.ErrInvalidReply},
		{name: "nil", res: nil, wantErr: cpex.ErrInvalidReply},
		{name: "tool error", res: &mcp.CallToolResult{IsError: true, Content: text("Error executing tool invoke_hook: boom")}, wantErr: cpex.ErrInvalidReply},
		{name: "tool error with JSON text", res: &mcp.CallToolResult{IsError: true, Content: text(`{"plugin_name":"p","result":{}}`)}, wantErr: cpex.ErrInvalidReply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseInvokeReply(sdkResult(tt.res))
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
		reply, err := parseInvokeReply(sdkResult(&mcp.CallToolResult{IsError: isError, Content: text(s)}))
		if err != nil {
			if !errors.Is(err, cpex.ErrInvalidReply) {
				t.Fatalf("error %v does not wrap cpex.ErrInvalidReply", err)
			}
			return
		}
		if reply.Result == nil && reply.Error == nil {
			t.Fatalf("accepted reply without result or error: %q", s)
		}
	})
}
