// Package mcpecho is a small MCP server used as the upstream behind Envoy in
// the demo, the end-to-end tests and the kind deployment: tools echo and
// progress, a prompt and a resource, served over Streamable HTTP by the
// go-sdk ([Handler]). Variants for the paths a result can take besides the
// POST's own answer: [ResumableHandler] (2025-11-25 with an event store:
// priming events and replay after Last-Event-ID), [StatelessHandler]
// (2026-07-28 without sessions, with a tool whose argument is mirrored into
// an Mcp-Param header) and [TaskServer] (tools as tasks, 2025-11-25 and
// 2026-07-28 shapes). testdata/mcp-replay holds recorded traffic of these
// and of the TypeScript SDK's reference server.
package mcpecho

import (
	"context"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ResourceURI is the URI of the server's one resource.
const ResourceURI = "mem://notes/welcome"

// ResourceText is that resource's content.
const ResourceText = "Welcome. Contact alice@example.com for access."

// EchoArgs are the arguments of the echo tool.
type EchoArgs struct {
	Message string `json:"message" jsonschema:"the text to echo"`
}

// ProgressArgs are the arguments of the progress tool.
type ProgressArgs struct {
	Steps int `json:"steps" jsonschema:"how many progress notifications to send before the result"`
}

// NewServer returns the MCP server.
func NewServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcp-echo", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes the message back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in EchoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Message}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "Sends progress notifications, then a result."},
		func(ctx context.Context, req *mcp.CallToolRequest, in ProgressArgs) (*mcp.CallToolResult, any, error) {
			token := req.Params.GetProgressToken()
			for i := 1; i <= in.Steps && token != nil; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token, Progress: float64(i), Total: float64(in.Steps),
				}); err != nil {
					return nil, nil, fmt.Errorf("notify progress: %w", err)
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("done after %d steps", in.Steps)}}}, nil, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greeting", Description: "A greeting for a city.",
		Arguments: []*mcp.PromptArgument{{Name: "city", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{
				Role: "user", Content: &mcp.TextContent{Text: "Say hello to " + req.Params.Arguments["city"]},
			}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: ResourceURI, Name: "welcome", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: ResourceText}}}, nil
		})
	return s
}

// Handler serves the server over Streamable HTTP. json selects
// application/json answers instead of SSE.
func Handler(json bool) http.Handler {
	srv := NewServer()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: json})
}
