// Package pluginclient is the client side of the ContextForge (cpex)
// external plugin protocol (docs/plugin-protocol.md): a [Client] per plugin
// keeps a few long-lived MCP Streamable HTTP sessions (Options.Slots,
// default [DefaultSlots]), with get_plugin_config, the config merge,
// invoke_hook, TLS, health checks, and transparent session rebuild when a
// plugin server restarts. A [Pool] is a fixed set of clients looked up by
// name.
//
// # Sessions, replicas and endpoints
//
// Each session rides one HTTP/1.1 connection of its own (see pin.go), so
// all its requests reach the replica that created it, whatever balances
// connections in between: a ClusterIP Service needs no session affinity.
// The client resolves the plugin URL's host ([endpoints.Watcher]: at Start,
// every Options.ResolveInterval, and soon after a failed connection) and
// spreads its sessions over the addresses, at least one each: a headless
// Service's pods each get sessions, a Service address gets them all. Sessions
// of an address that disappears drain (no new calls, closed once their
// calls are done); a new address gets new sessions. The Host header and the
// TLS server name stay the URL's. With several addresses each is a Pod: its
// sessions may use several connections at once.
//
// A call goes to the ready session with the fewest calls in flight (a
// pinned session carries one call at a time); a session being rebuilt, or
// whose connection the server closed while idle, is skipped and rebuilt in
// the background. The plugin is Ready while any session is, and Down (its
// circuit open, calls failing at once with [ErrPluginDown]) only when every
// session's circuit is open.
//
// A plugin server that speaks MCP 2026-07-28 (server/discover) is used
// without sessions: no initialize, any replica serves any call, and its
// connections are never stale. Older servers get the 2025-11-25 initialize.
//
// # Answers, session loss and rebuild
//
// What crossed the wire decides, observed at the HTTP layer by a
// RoundTripper under the go-sdk transport (not by matching error text).
// Every answer about ONE call is that call's error, returned once and never
// retried (a plugin with side effects must not run twice); only what says
// the session is gone makes a rebuild:
//
//	what the call got                                   verdict         the call's error
//	2xx with a valid invoke_hook reply                  answer          none
//	2xx, tool error (isError) or not a reply            answer          ErrInvalidReply
//	2xx JSON body that is not JSON-RPC                  answer          ErrInvalidReply
//	JSON-RPC error sent by the server                   answer          the *jsonrpc.Error
//	4xx/5xx not listed below (400, 413, 429, 431, 500)  answer          ErrRefused
//	404 to a request carrying Mcp-Session-Id            session gone    rebuild, retry once
//	400 to Mcp-Session-Id whose body mentions a session session gone    rebuild, retry once
//	502, 503, 504 (nothing behind a Kubernetes Service) session gone    rebuild, retry once
//	connection refused or reset, EOF, TLS failure,      session gone    rebuild, retry once
//	body cut off, go-sdk ErrSessionMissing or
//	ErrConnectionClosed
//	SSE stream ended cleanly without an answer          unknown         ping: retry once on the
//	                                                                    session if it answers,
//	                                                                    else rebuild and retry
//
// A refusal is turned into a RoundTrip error, which the go-sdk treats as one
// failed call: handed over as a response, a non-2xx without a JSON-RPC body
// would break the whole connection (every later call failing).
//
// On session loss the lost session is closed without a DELETE (the server
// does not know it), a new one is connected (full initialize, no stale
// session id), the plugin config is fetched and merged again, and the failed
// invoke_hook is retried once. Concurrent calls that hit the same dead
// session share one rebuild.
//
// Each session is rebuilt on its own. A rebuild makes mcp.reconnect_attempts
// connection attempts (at least one),
// spaced by exponential backoff with full jitter (base mcp.reconnect_delay).
// When all fail, the circuit opens: the plugin is Down, every call fails at
// once with ErrPluginDown, and a background loop reconnects with capped
// backoff and closes the circuit as soon as the plugin answers. Health checks
// (MCP ping every plugin_health_check_interval) find a dead session before a
// request does. A plugin that is down at Start does not stop the client.
//
// # Other transports
//
// cpex also serves plugins over gRPC and a framed Unix socket, where no
// session exists and a restart is a broken connection. [Conn] is what one
// connection of any transport provides; see conn.go for how a transport
// plugs in under the same circuit breaker, health check and metrics.
package pluginclient

import (
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/endpoints"
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
	// ErrRefused means the plugin server refused the HTTP request of this
	// one call (e.g. 413, 431, a 400 that does not mention a session, 500):
	// a plugin error for that call; the session is kept.
	ErrRefused = errors.New("plugin refused the request")
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
	// Retries counts calls retried on a rebuilt session; RetryFailures
	// those whose retry failed too.
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
	// OnRetry is called after a call was retried on a rebuilt session.
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
// per-session events: rebuilds by cause (CauseCall, CauseHealth, CauseIdle)
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
