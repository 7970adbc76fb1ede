package wireconn

import (
	"context"
	"errors"
	"net/http"
)

// ErrNoAnswer is wrapped by errors of calls that got no answer although the
// connection (or session) may still be good: the connection under the call
// closed or reset, or a stream ended before the reply. The caller asks the
// connection whether it still lives (Conn.Health): if it answers, the call
// is retried once on it; if not, the connection is rebuilt and the call
// retried once there. Only an answer that says the connection or session is
// gone wraps [ErrConnLost].
var ErrNoAnswer = errors.New("plugin call got no answer")

// ErrRefused is wrapped by errors of calls the plugin server refused (an
// HTTP 413, 431, 500 or a 400 that is not about a session; a gRPC status; a
// frame too large): a plugin error for that one call; the connection is
// kept and the call is not retried.
var ErrRefused = errors.New("plugin refused the request")

type headersKey struct{}

// WithHeaders returns a copy of ctx whose plugin calls carry h as extra
// headers (HTTP headers on MCP, metadata on gRPC): for example the request's
// x-request-id. Each transport keeps the headers it owns out of reach, and
// sets traceparent and tracestate from ctx's span context when it has a
// valid one ([TraceContext]). h must not be modified after the call.
func WithHeaders(ctx context.Context, h http.Header) context.Context {
	return context.WithValue(ctx, headersKey{}, h)
}

// Headers returns the headers WithHeaders attached to ctx, or nil.
func Headers(ctx context.Context) http.Header {
	h, _ := ctx.Value(headersKey{}).(http.Header)
	return h
}

// ErrSessionGone is wrapped, with [ErrConnLost], by errors whose answer said
// the server does not know the session (an MCP 404, or a 400 about the
// session): a restart, or another replica behind a per-connection balancer.
// Nothing ran: the call is retried once on a rebuilt session.
var ErrSessionGone = errors.New("plugin session not found")

// ErrUnavailable is wrapped, with [ErrConnLost], by errors whose answer came
// from something in front of the plugin saying nothing is behind it (HTTP
// 502, 503, 504).
var ErrUnavailable = errors.New("plugin unavailable")
