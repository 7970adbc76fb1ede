// Package pluginclient is the MCP client side of the ContextForge (cpex)
// external plugin protocol (docs/plugin-protocol.md): one long-lived
// Streamable HTTP session per plugin, shared by all callers, with
// get_plugin_config, the config merge, invoke_hook, TLS, and transparent
// session rebuild when a plugin server restarts.
//
// # Session loss and rebuild
//
// Session loss is observed at the HTTP layer, by a RoundTripper under the
// go-sdk transport (not by matching error text): a 404 (plain text or
// JSON-RPC body) or a 400 "no valid session" to a request carrying
// Mcp-Session-Id, a 502/503/504, a connection refused or reset, a response
// cut off mid-way; plus the SDK's ErrSessionMissing and ErrConnectionClosed.
// The lost session is closed without a DELETE (the server does not know it),
// a new one is connected (full initialize, no stale session id), the plugin
// config is fetched and merged again, and the failed invoke_hook is retried
// once. Concurrent calls that hit the same dead session share one rebuild.
//
// A rebuild makes mcp.reconnect_attempts connection attempts (at least one),
// spaced by exponential backoff with full jitter (base mcp.reconnect_delay).
// When all fail, the circuit opens: the plugin is Down, every call fails at
// once with ErrPluginDown, and a background loop reconnects with capped
// backoff and closes the circuit as soon as the plugin answers. Health checks
// (MCP ping every plugin_health_check_interval) find a dead session before a
// request does. A plugin that is down when the pool starts does not stop the
// pool.
package pluginclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
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
	// ErrTimeout means the call did not finish before its deadline (the
	// caller's, or Options.PluginTimeout). Such errors also match
	// context.DeadlineExceeded.
	ErrTimeout = errors.New("plugin timeout")
	// ErrClosed means the pool was closed.
	ErrClosed = errors.New("plugin pool closed")
	// ErrNotStarted means Invoke was called before Start.
	ErrNotStarted = errors.New("plugin pool not started")
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

// Stats are one plugin's counters since NewPool.
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
}

// Observer receives plugin events, for example to export metrics. Methods
// are called synchronously from the pool's goroutines and must not block.
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

type nopObserver struct{}

func (nopObserver) OnRebuild(string)                   {}
func (nopObserver) OnRetry(string, bool)               {}
func (nopObserver) OnStateChange(string, State, State) {}
func (nopObserver) OnHealthCheck(string, bool)         {}

// DefaultMaxReconnectDelay is the default of Options.MaxReconnectDelay.
// The other defaults are cpex's, from package config.
const DefaultMaxReconnectDelay = 5 * time.Second

// Options configures a Pool. The zero value means the defaults.
type Options struct {
	// Logger receives one line per session established, rebuild, circuit
	// change and failed health check (never one per request).
	Logger zerolog.Logger
	// HTTPClient, if set, provides the base RoundTripper (its Transport, or
	// http.DefaultTransport if nil) for all plugins; mcp.tls is then not
	// applied. Default: a pooled keep-alive transport per TLS setting.
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
	// Observer, if set, receives events (see Observer).
	Observer Observer
}

// Pool holds one client per external plugin. It is safe for concurrent use.
type Pool struct {
	clients []*client
	byName  map[string]*client
	owned   []*http.Transport // transports the pool created, closed by Close

	mu        sync.Mutex
	gen       uint64
	genSeen   atomic.Uint64 // gen, readable without mu
	effective []config.Plugin

	startOnce sync.Once
	closeOnce sync.Once
	cancel    context.CancelFunc // stops background goroutines; set by Start
	closeErr  error
}

// NewPool validates plugins and prepares a client for each. Only kind
// "external" with mcp.proto STREAMABLEHTTP and an http(s) url is supported;
// anything else is an error naming the plugin. Nothing is connected until
// Start.
func NewPool(plugins []config.Plugin, settings config.PluginSettings, opts Options) (*Pool, error) {
	timeout := settings.Timeout()
	if opts.PluginTimeout > 0 {
		timeout = opts.PluginTimeout
	}
	if timeout <= 0 {
		timeout = config.DefaultPluginTimeout
	}
	health := settings.HealthCheckInterval()
	if opts.HealthCheckInterval != 0 {
		health = opts.HealthCheckInterval
	}
	maxDelay := DefaultMaxReconnectDelay
	if opts.MaxReconnectDelay > 0 {
		maxDelay = opts.MaxReconnectDelay
	}
	var obs Observer = nopObserver{}
	if opts.Observer != nil {
		obs = opts.Observer
	}

	p := &Pool{byName: make(map[string]*client, len(plugins))}
	var shared http.RoundTripper
	if opts.HTTPClient != nil {
		shared = opts.HTTPClient.Transport
		if shared == nil {
			shared = http.DefaultTransport
		}
	}
	newTransport := func() *http.Transport {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Many concurrent calls to one plugin: keep their connections.
		t.MaxIdleConnsPerHost = 64
		p.owned = append(p.owned, t)
		return t
	}

	var plain *http.Transport // shared by the plugins without mcp.tls
	mcpClient := mcp.NewClient(&mcp.Implementation{Name: "mcp-extproc", Version: "0.1.0"},
		&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	for i, pl := range plugins {
		if err := validate(pl); err != nil {
			return nil, fmt.Errorf("plugin %q: %w", pl.Name, err)
		}
		if _, dup := p.byName[pl.Name]; dup {
			return nil, fmt.Errorf("plugin %q: duplicate name", pl.Name)
		}
		base := shared
		if base == nil {
			switch {
			case pl.MCP.TLS != nil:
				tc, err := tlsConfig(pl.MCP.TLS)
				if err != nil {
					return nil, fmt.Errorf("plugin %q: mcp.tls: %w", pl.Name, err)
				}
				t := newTransport()
				t.TLSClientConfig = tc
				base = t
			default:
				if plain == nil {
					plain = newTransport()
				}
				base = plain
			}
		}
		attempts, delay := pl.MCP.Attempts(), pl.MCP.Delay()
		c := &client{
			pool:    p,
			index:   i,
			name:    pl.Name,
			local:   pl,
			url:     pl.MCP.URL,
			base:    base,
			mcp:     mcpClient,
			timeout: timeout,
			health:  health,
			log:     opts.Logger.With().Str("plugin", pl.Name).Logger(),
			obs:     obs,
		}
		c.sup = reconnect.New(c.supervisorConfig(attempts, reconnect.Backoff{Base: delay, Max: maxDelay}))
		p.clients = append(p.clients, c)
		p.byName[pl.Name] = c
		p.effective = append(p.effective, pl)
	}
	return p, nil
}

// validate checks that pl is a plugin this client can serve.
func validate(pl config.Plugin) error {
	if pl.Name == "" {
		return errors.New("no name")
	}
	if pl.Kind != config.KindExternal {
		return fmt.Errorf("kind %q is not supported (only external MCP plugins)", pl.Kind)
	}
	if pl.MCP == nil {
		return errors.New("kind external needs an mcp section")
	}
	if !strings.EqualFold(pl.MCP.Proto, config.ProtoStreamableHTTP) {
		return fmt.Errorf("mcp.proto %q is not supported (only STREAMABLEHTTP)", pl.MCP.Proto)
	}
	u, err := url.Parse(pl.MCP.URL)
	if err != nil {
		return fmt.Errorf("mcp.url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("mcp.url %q: want an http(s) URL", pl.MCP.URL)
	}
	return nil
}

// Start connects every plugin in the background and returns at once. A
// plugin that cannot be reached is marked Down and keeps being retried; it
// becomes Ready when it comes up. Background goroutines stop when Close is
// called or ctx is done. Calls after the first are no-ops.
func (p *Pool) Start(ctx context.Context) {
	p.startOnce.Do(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.cancel != nil { // closed before start
			return
		}
		bg, cancel := context.WithCancel(ctx)
		p.cancel = cancel
		for _, c := range p.clients {
			c.sup.Start(bg)
			if c.health > 0 {
				c.wg.Add(1)
				go c.healthLoop(bg)
			}
		}
	})
}

// Invoke runs hook on plugin with payload and context pctx (nil: an empty
// context). It uses the plugin's shared session, waits for a rebuild in
// progress, and retries once on a new session if the session was lost.
//
// The call is bounded by ctx's deadline, or by the plugin timeout if ctx has
// none. Errors wrap ErrPluginDown (circuit open), ErrTimeout, ErrInvalidReply,
// ErrClosed, ErrNotStarted or ErrUnknownPlugin, or describe a transport or
// protocol failure. A plugin's error reply is returned as the reply, with a
// nil error.
func (p *Pool) Invoke(ctx context.Context, plugin string, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	c, ok := p.byName[plugin]
	if !ok {
		return nil, fmt.Errorf("plugin %s: %w", plugin, ErrUnknownPlugin)
	}
	return c.invoke(ctx, hook, payload, pctx)
}

// Effective returns the merged configs (remote, then local overrides) of all
// plugins in local config order, and a generation number that increases
// whenever any merged config changes (a plugin connected or reconnected with
// a different remote config). Before a plugin ever connected, its local
// config is returned as is. The configs share their slices and maps with the
// pool: do not modify them.
func (p *Pool) Effective() (gen uint64, plugins []config.Plugin) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen, append([]config.Plugin(nil), p.effective...)
}

// Generation returns the generation Effective would report, without copying
// the configs: callers on the request path compare it with the generation
// they planned for.
func (p *Pool) Generation() uint64 { return p.genSeen.Load() }

// setEffective records plugin i's merged config, bumping the generation if
// it changed.
func (p *Pool) setEffective(i int, merged config.Plugin) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !reflect.DeepEqual(p.effective[i], merged) {
		p.effective[i] = merged
		p.gen++
		p.genSeen.Store(p.gen)
	}
}

// State returns plugin's state; an unknown plugin is Down.
func (p *Pool) State(plugin string) State {
	c, ok := p.byName[plugin]
	if !ok {
		return Down
	}
	return c.sup.State()
}

// States returns the state of every plugin, for readiness reports.
func (p *Pool) States() map[string]State {
	out := make(map[string]State, len(p.clients))
	for _, c := range p.clients {
		out[c.name] = c.sup.State()
	}
	return out
}

// Stats returns plugin's counters; an unknown plugin has zero counters and
// state Down.
func (p *Pool) Stats(plugin string) Stats {
	c, ok := p.byName[plugin]
	if !ok {
		return Stats{State: Down}
	}
	return c.stats()
}

// Close stops the background loops and closes every session: a live session
// gets a DELETE, a lost one does not. Calls in flight fail with ErrClosed or
// their own error. Close is bounded by ctx and returns ctx.Err() if ctx ends
// first. Later calls return the first call's result.
func (p *Pool) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		if p.cancel == nil {
			p.cancel = func() {} // Start becomes a no-op
		}
		cancel := p.cancel
		p.mu.Unlock()
		cancel()

		done := make(chan struct{})
		go func() {
			defer close(done)
			var wg sync.WaitGroup
			for _, c := range p.clients {
				wg.Go(func() {
					c.sup.Close()
					if s := c.current(); s != nil {
						if err := s.close(ctx); err != nil {
							c.log.Debug().Err(err).Msg("close plugin session")
						}
					}
					c.wg.Wait()
				})
			}
			wg.Wait()
			for _, t := range p.owned {
				t.CloseIdleConnections()
			}
		}()
		select {
		case <-done:
		case <-ctx.Done():
			p.closeErr = fmt.Errorf("close plugin pool: %w", ctx.Err())
		}
	})
	return p.closeErr
}
