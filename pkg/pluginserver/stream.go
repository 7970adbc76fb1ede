package pluginserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Serve serves the plugins over one MCP connection made by t, for example
// &mcp.StdioTransport{} (a plugin server started by the sidecar with
// mcp.proto STDIO), until the client ends the connection or ctx ends. A
// client that closes the connection is not an error.
func (s *Server) Serve(ctx context.Context, t mcp.Transport) error {
	ep := s.newEndpoint()
	defer ep.Close()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	context.AfterFunc(ep.ctx, stop) // Server.Close ends it too
	err := ep.mcp.Run(ctx, t)
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, mcp.ErrConnectionClosed):
		return nil
	}
	return fmt.Errorf("serve plugins: %w", err)
}

// SSEHandler returns a new handler serving the plugins over the legacy
// HTTP+SSE transport (MCP 2024-11-05: a GET event stream per session, its
// messages POSTed to the endpoint the stream names), as older plugin
// servers do (mcp.proto SSE). Like Handler, every call returns an
// independent endpoint that also implements io.Closer.
func (s *Server) SSEHandler() http.Handler {
	ep := s.newEndpoint()
	ep.http = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return ep.mcp }, nil)
	return ep
}
