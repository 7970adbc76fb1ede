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

import (
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/endpoints"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/reconnect"
)

// Errors returned by Invoke, tested with errors.Is. A plugin's own error
// reply (PluginErrorModel) is not an error: it is returned as the reply.
var (
	// ErrPluginDown means the plugin's circuit is open (it could not be
	// reached after the configured reconnect attempts): apply the plugin's
	// failure policy at once. A background loop is reconnecting.
	ErrPluginDown = errors.New("plugin down")
	// ErrInvalidReply means the plugin answered with something that is not
	// a valid invoke_hook reply (neither result nor error, not JSON, or a
	// tool error). It is a plugin error.
	ErrInvalidReply = cpex.ErrInvalidReply
	// ErrRefused means the plugin server refused the request of this one
	// call (e.g. HTTP 413, 431, a 400 that does not mention a session,
	// 500; a gRPC status): a plugin error for that call; the session is
	// kept.
	ErrRefused = wireconn.ErrRefused
	// ErrTimeout means the call did not finish before its deadline (the
	// caller's, or Options.PluginTimeout). Such errors also match
	// context.DeadlineExceeded.
	ErrTimeout = errors.New("plugin timeout")
	// ErrClosed means the client was closed.
	ErrClosed = errors.New("plugin client closed")
	// ErrNotStarted means Invoke was called before Start.
	ErrNotStarted = errors.New("plugin client not started")
	// ErrUnknownPlugin means no plugin of that name is configured.
	ErrUnknownPlugin = errors.New("unknown plugin")
)

// State is the connection state of a plugin: Connecting before its first
// session, Ready when calls go through (possibly after waiting for a
// rebuild in progress), Down while its circuit is open.
type State = reconnect.State

// The plugin states.
const (
	Connecting = reconnect.Connecting
	Ready      = reconnect.Ready
	Down       = reconnect.Down
)

// Stats are one plugin's counters since New.
type Stats struct {
	State State
	// Connects counts sessions established (the first one and every
	// rebuilt one).
	Connects uint64
	// Rebuilds counts session rebuilds started after a session loss, one
	// per loss however many calls saw it.
	Rebuilds uint64
	// Retries counts calls retried after getting no answer (on the same
	// session when it answered a ping, else on a rebuilt one);
	// RetryFailures those whose retry failed too.
	Retries       uint64
	RetryFailures uint64
	// CircuitOpens counts transitions to Down.
	CircuitOpens uint64
	// HealthChecksOK and HealthChecksFailed count pings.
	HealthChecksOK     uint64
	HealthChecksFailed uint64
	// Sessions counts the plugin's sessions by state.
	Sessions Sessions
}

// Observer receives plugin events, for example to export metrics. Each
// event is reported once, to the client's own counters (see Stats) and to
// Options.Observer. Methods are called synchronously from the client's
// goroutines and must not block.
type Observer interface {
	// OnRebuild is called when a session rebuild starts after a loss.
	OnRebuild(plugin string)
	// OnRetry is called after a call that got no answer was retried (on
	// the same session, or a rebuilt one).
	OnRetry(plugin string, ok bool)
	// OnStateChange is called on every state transition.
	OnStateChange(plugin string, from, to State)
	// OnHealthCheck is called after every health check ping.
	OnHealthCheck(plugin string, ok bool)
}

// DefaultMaxReconnectDelay is the default of Options.MaxReconnectDelay.
// The other defaults are cpex's, from package config.
const DefaultMaxReconnectDelay = 5 * time.Second

// Options configures a Client (or every client of a Pool). The zero value
// means the defaults.
type Options struct {
	// Logger receives one line per session established, rebuild, circuit
	// change and failed health check (never one per request).
	Logger zerolog.Logger
	// HTTPClient, if set, provides the base RoundTripper (its Transport, or
	// http.DefaultTransport if nil); mcp.tls is then not applied. Default:
	// a keep-alive transport of the client's own, closed by Close.
	HTTPClient *http.Client
	// HealthCheckInterval overrides plugin_health_check_interval (default
	// 60 s). Negative disables health checks.
	HealthCheckInterval time.Duration
	// PluginTimeout overrides plugin_timeout (default 30 s): the timeout of
	// a call whose ctx has no deadline, and of each connection attempt.
	PluginTimeout time.Duration
	// MaxReconnectDelay caps the backoff of the background loop while a
	// plugin is down (default 5 s).
	MaxReconnectDelay time.Duration
	// Observer, if set, receives events (see Observer, and SessionObserver
	// for the per-session ones).
	Observer Observer
	// Slots is how many connections (MCP sessions) the client keeps to
	// the plugin, spread over its endpoint addresses (default
	// DefaultSlots). config.Extproc.PluginSessions sets it.
	Slots int
	// Dialer, if set, makes every slot's connection instead of the MCP
	// Streamable HTTP transport: the seam of other transports (see Conn).
	Dialer Dialer
	// Resolver looks up the addresses behind the plugin URL's host
	// (default: the system resolver). Tests inject one.
	Resolver endpoints.Resolver
	// ResolveInterval is how often the host is looked up again (default
	// endpoints.DefaultInterval); a failed connection asks for a lookup
	// sooner.
	ResolveInterval time.Duration
}

// SessionObserver is implemented by an Observer that also wants the
// per-session events: rebuilds by cause (CauseNotFound, CauseUnavailable,
// CauseUnreachable)
// and the plugin's sessions by state, reported whenever they change (all
// zero once the client is closed).
type SessionObserver interface {
	OnRebuildCause(plugin, cause string)
	OnSessions(plugin string, s Sessions)
}

// Sessions counts a plugin's sessions (slots) by state, and the endpoint
// addresses they are spread over (1 when the plugin URL's host is a
// Service address).
type Sessions struct {
	Ready, Connecting, Rebuilding, Down, Draining int
	Endpoints                                     int
}
