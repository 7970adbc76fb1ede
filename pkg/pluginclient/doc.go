// Package pluginclient is the client side of the ContextForge (cpex)
// external plugin protocol (docs/plugin-protocol.md): a [Client] per plugin
// keeps a few long-lived connections (Options.Slots, default
// [DefaultSlots]) over one of three sibling transports behind the [Conn]
// seam: MCP Streamable HTTP sessions (mcpconn), gRPC (grpcconn), or cpex's
// framed Unix socket (unixconn). It fetches and merges the plugin config,
// runs invoke_hook, health-checks, and rebuilds a connection when the
// server says it is gone. A [Pool] is a fixed set of clients looked up by
// name.
//
// # One call's path
//
// Client.invoke (invoke.go) is the whole path of a call: choose the ready
// slot with the fewest calls in flight (waiting for a rebuild in progress
// only when no slot is ready), send, then by what the transport said:
//
//	the call got                         next
//	an answer (reply, plugin error,      returned, never retried: a plugin
//	refusal, invalid reply, timeout)     with side effects must not run twice
//	ErrConnLost: the server says the     that slot rebuilt (once for all its
//	session is gone, or 502/503/504      callers), the call retried once on it
//	wireconn.ErrNoAnswer: the            a ping on the same session: it
//	connection under the call ended,     answers, the call is retried once on
//	no answer came                       it; it does not, rebuild and retry
//
// A session lives in the server, not in a TCP connection: a closed idle
// connection (Node.js and uvicorn close them after 5 s) is dialled again by
// the next call, and a quiet plugin costs nothing (no background rebuild,
// no keep-alive traffic). See mcpconn for how answers are classified.
//
// # Sessions, replicas and endpoints
//
// An MCP session on a Service address uses one connection at a time, so
// while it lives all its requests reach the replica that created it,
// whatever balances connections in between: a ClusterIP Service needs no
// session affinity. When the connection ends, a new one that reaches
// another replica is answered "session not found" before anything ran:
// the session is rebuilt there and the call retried once. The client
// resolves the plugin URL's host ([endpoints.Watcher]: at Start, every
// Options.ResolveInterval, and soon after a failed connection) and spreads
// its sessions over the addresses, at least one each: a headless Service's
// pods each get sessions, a Service address gets them all. Sessions of an
// address that disappears drain (no new calls, closed once their calls are
// done); a new address gets new sessions. The Host header and the TLS
// server name stay the URL's. With several addresses each is a Pod: its
// sessions may use several connections at once.
//
// A plugin server that speaks MCP 2026-07-28 (server/discover) is used
// without sessions: no initialize, any replica serves any call. Older
// servers get the 2025-11-25 initialize.
//
// # Rebuilds and the circuit
//
// A lost session is closed without a DELETE (the server does not know it),
// a new one is connected (full initialize, no stale session id), the plugin
// config is fetched and merged again. Calls in flight on a replaced
// connection finish on it. Each slot is rebuilt on its own: a rebuild makes
// mcp.reconnect_attempts connection attempts (at least one), spaced by
// exponential backoff with full jitter (base mcp.reconnect_delay). When all
// fail, the slot's circuit opens; the plugin is Down (every call failing at
// once with [ErrPluginDown]) only when every slot's circuit is open, while a
// background loop reconnects with capped backoff. Health checks (a ping
// every plugin_health_check_interval) find a dead session before a request
// does. A plugin that is down at Start does not stop the client. Every
// rebuild is logged at warn with what was seen, and counted by cause
// (CauseNotFound, CauseUnavailable, CauseUnreachable).
package pluginclient
