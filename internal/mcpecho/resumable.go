package mcpecho

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ResumableHandler serves NewServer statefully with an in-memory event
// store, as a 2025-11-25 server that supports resumption: each POST answered
// with SSE starts with a priming event (an id and no data), every event has
// an id "<stream>_<index>", and a GET carrying Mcp-Session-Id and
// Last-Event-ID replays the events of that stream after the id — the tool's
// response included, whether or not it was delivered on the POST. (The Go
// SDK sends priming events only to clients that negotiated 2025-11-25; with
// 2026-07-28 there is no resumption.)
func ResumableHandler() http.Handler {
	srv := NewServer()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
}
