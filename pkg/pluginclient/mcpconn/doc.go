// Package mcpconn is the MCP Streamable HTTP transport of the plugin client:
// one MCP session to a plugin server as a [wireconn.Conn], beside the gRPC
// (grpcconn) and Unix-socket (unixconn) transports. It speaks the cpex tools
// (get_plugin_config, invoke_hook) and tells, from what crossed the wire,
// what a call's error means. It never retries: the client (package
// pluginclient) decides, in one place, where a call goes next.
//
// The go-sdk client makes, pings and ends each session and fetches plugin
// configs. The invoke_hook call, which a hooked exchange waits for, is one
// POST on that session made and read here (post.go) for every protocol
// version before 2026-07-28: the go-sdk client decodes each message with a
// fresh 32 KiB buffer and hands the answer between goroutines, a third of
// a call's cost on loopback. The answer is JSON or an event stream whose
// events before the response (a priming event, progress and log
// notifications) are passed over; a request from the server fails the
// call (plugins have no use for sampling, elicitation or roots). The call
// returns with its response; what follows it on the stream is drained in
// the background, and a caller that gives up gets its error at once while
// the server is sent a notifications/cancelled, as the go-sdk does. A
// 2026-07-28 session stays with the go-sdk.
//
// # A session lives in the server
//
// A session is lost when the server says so, never because a TCP connection
// ended. Node.js and uvicorn close idle connections after 5 s; a server may
// answer with Connection: close; the next request simply dials again. A
// session's requests share one connection at a time (see transport), so
// while it lives they all reach the replica that made the session; a new
// connection that a per-connection balancer hands to another replica is
// answered "session not found", which is the server's word like any other.
//
// Every answer is read to its end (at most 64 KiB, within a second) before
// its body is closed, whatever its framing (chunked, Content-Length, empty,
// Connection: close), so connections are reused: the go-sdk closes a
// notification's answer unread, and Node's empty chunked 202 would
// otherwise cost the connection.
//
// # What a call's error means
//
// Observed at the HTTP layer by a RoundTripper under the go-sdk transport,
// not by matching error text. Every answer about ONE call is that call's
// error; only what says the session is gone wraps ErrConnLost:
//
//	what the call got                                   error wraps
//	2xx with a valid invoke_hook reply                  (none)
//	2xx, tool error (isError) or not a reply            cpex.ErrInvalidReply
//	2xx JSON body that is not JSON-RPC                  cpex.ErrInvalidReply
//	JSON-RPC error sent by the server                   the *jsonrpc.Error
//	4xx/5xx not listed below (400, 413, 429, 431, 500)  wireconn.ErrRefused
//	404 to a request carrying Mcp-Session-Id            ErrConnLost, ErrSessionGone
//	400 to Mcp-Session-Id whose body mentions a session ErrConnLost, ErrSessionGone
//	502, 503, 504 (nothing behind a Kubernetes Service) ErrConnLost, ErrUnavailable
//	2xx a request from the server, another id's answer  cpex.ErrInvalidReply
//	go-sdk ErrSessionMissing, ErrConnectionClosed       ErrConnLost
//	connection refused or reset, EOF, TLS failure,      wireconn.ErrNoAnswer
//	body cut off, stream ended without the answer
//
// A refusal is turned into a RoundTrip error, which the go-sdk treats as one
// failed call: handed over as a response, a non-2xx without a JSON-RPC body
// would break the whole connection (every later call failing).
//
// # Trace context
//
// An invoke_hook call made under a ctx with a valid OpenTelemetry span
// context carries its W3C traceparent and tracestate in params._meta
// (SEP-414) on every transport here (Streamable HTTP, stateless 2026-07-28,
// legacy SSE, STDIO), and over HTTP also as the traceparent and tracestate
// headers, replacing those of wireconn.WithHeaders. Without one nothing is
// added and nothing allocated.
//
// Health (an MCP ping) is the probe of whether a session lives: a ping that
// gets no answer wraps ErrConnLost. A session the server said is gone is
// closed without a DELETE; a live one gets a DELETE bounded by a second.
package mcpconn
