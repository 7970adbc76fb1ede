package pluginclient

import (
	"context"
	"net/http"

	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
)

// ErrConnLost marks an error of a [Conn] meaning the connection (or session)
// is gone and the call got no answer: the client rebuilds that connection
// and retries the call once, on another ready connection if there is one.
// Any other error from a Conn is an answer about that call (or a timeout):
// it is returned, never retried, so a plugin never runs twice for one hook.
// It is the protobuf transports' wireconn.ErrConnLost: one sentinel for
// every transport.
var ErrConnLost = wireconn.ErrConnLost

// Conn is what one connection to a plugin server provides, whatever the
// transport: the seam where the MCP session (mcpconn), and gRPC or
// framed Unix-socket connections (which have no session: a restart is a
// broken connection), plug in under the same supervisor (single-flight
// rebuild, backoff, circuit breaker), health check, metrics and tracing.
//
// A [Client] holds a few slots (Options.Slots); each slot owns one Conn at
// a time, made by a [Dialer] and replaced through its own
// reconnect.Supervisor when the Conn reports ErrConnLost. Calls go to the
// ready slot with the fewest calls in flight; the plugin is Down only when
// every slot is.
//
// A transport implements Conn in its own package, wrapping ErrConnLost into
// the errors that mean the connection is gone and nothing else,
// wireconn.ErrNoAnswer into those of a call that got no answer on a
// connection that may still live (the client then asks Health), and
// ErrInvalidReply into replies it cannot decode, and hands its Dialer to the
// client (New does this itself for the grpc: and unix_socket: sections, see
// wire.go):
//
//	c, err := pluginclient.New(pl, settings, pluginclient.Options{
//		Dialer: func(ctx context.Context) (pluginclient.Conn, error) { return mytransport.Dial(ctx, addr) },
//		Slots:  1, // one multiplexed connection is enough
//	})
//
// With Options.Dialer set, New checks only the plugin's name (the transport
// checks its own config section), and every slot dials through it. Without
// it, the client speaks MCP Streamable HTTP to pl.MCP.URL through mcpconn
// (see the package doc for sessions and endpoints).
//
// Conn methods are called concurrently (several calls in flight on one
// slot) unless the transport serialises them itself.
//
// It is wireconn.Conn, where the protobuf transports (which cannot import
// this package) implement it: one interface for every transport.
type Conn = wireconn.Conn

// Dialer makes a new Conn to one plugin server, bounded by ctx.
type Dialer func(ctx context.Context) (Conn, error)

// WithHeaders returns a copy of ctx whose plugin calls carry h as extra
// headers (for example the request's x-request-id): HTTP headers on MCP,
// except the ones the MCP transport owns (Content-Type, Accept,
// Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID) and hop-by-hop
// headers; metadata on gRPC. h must not be modified after the call.
//
// The trace context is not taken from h but from ctx's span context
// (OpenTelemetry; a remote parent is enough, no tracer provider needed):
// when ctx carries a valid one, its traceparent and tracestate replace h's
// and also go in the invoke_hook request's params._meta on every MCP
// transport (SEP-414), and in gRPC metadata. Unix-socket calls carry none.
// See docs/tracing.md.
func WithHeaders(ctx context.Context, h http.Header) context.Context {
	return wireconn.WithHeaders(ctx, h)
}
