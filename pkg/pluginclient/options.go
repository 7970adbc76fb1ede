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
