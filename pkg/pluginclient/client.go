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

// protocolVersion is the MCP version the client asks for. Pinning the latest
// version with the initialize handshake (rather than the SDK's default,
// which first tries the stateless server/discover of 2026-07-28) gives every
// plugin server, Python ones included, the same stateful session with a
// full initialize, and saves a failed round trip per connect.
const protocolVersion = "2025-11-25"

// deleteTimeout bounds the DELETE that ends a live session. It is
// best-effort: a server that does not answer must not hold up a rebuild or
// Close.
const deleteTimeout = time.Second

// maxIdleConns is how many idle keep-alive connections a client keeps to its
// plugin server: many concurrent calls to one plugin keep their connections.
const maxIdleConns = 64

// Client is the client of one external plugin: one long-lived MCP session
// shared by all callers, replaced through a reconnect.Supervisor (single
// flight rebuild, backoff, circuit breaker) when it is lost. It is safe for
// concurrent use.
type Client struct {
	name    string
	local   config.Plugin
	url     string
	base    http.RoundTripper // shared by all sessions: connection reuse
	owned   *http.Transport   // base, if the client made it; closed by Close
	mcp     *mcp.Client
	timeout time.Duration // default per-call timeout
	health  time.Duration // health check interval; <= 0: none
	log     zerolog.Logger
	count   counters
	ev      events
	sup     *reconnect.Supervisor

	mu  sync.Mutex
	cur *session // nil before the first connection

	// effective is the merged config; generation counts its changes.
	effective  atomic.Pointer[config.Plugin]
	generation atomic.Uint64

	lossCause atomic.Pointer[error] // the last session loss reported, for logs

	startOnce, closeOnce sync.Once
	cancel               context.CancelFunc // stops the health loop; set by Start
	closeErr             error

	wg sync.WaitGroup // health loop and background session closes
}

// New validates pl and prepares its client. Only kind "external" with
// mcp.proto STREAMABLEHTTP and an http(s) url is supported; anything else is
// an error. Nothing is connected until Start.
func New(pl config.Plugin, settings config.PluginSettings, opts Options) (*Client, error) {
	if err := validate(pl); err != nil {
		return nil, fmt.Errorf("plugin %q: %w", pl.Name, err)
	}
	c := &Client{
		name:    pl.Name,
		local:   pl,
		url:     pl.MCP.URL,
		timeout: orDefault(opts.PluginTimeout, settings.Timeout(), config.DefaultPluginTimeout),
		health:  settings.HealthCheckInterval(),
		log:     opts.Logger.With().Str("plugin", pl.Name).Logger(),
		mcp: mcp.NewClient(&mcp.Implementation{Name: "mcp-extproc", Version: "0.1.0"},
			&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}),
	}
	if opts.HealthCheckInterval != 0 {
		c.health = opts.HealthCheckInterval
	}
	c.ev = events{name: pl.Name, count: &c.count, obs: opts.Observer}
	c.effective.Store(&pl)
	if err := c.setTransport(pl, opts.HTTPClient); err != nil {
		return nil, fmt.Errorf("plugin %q: %w", pl.Name, err)
	}
	maxDelay := orDefault(opts.MaxReconnectDelay, 0, DefaultMaxReconnectDelay)
	backoff := reconnect.Backoff{Base: pl.MCP.Delay(), Max: maxDelay}
	c.sup = reconnect.New(c.supervisorConfig(pl.MCP.Attempts(), backoff))
	return c, nil
}

// orDefault returns the first positive duration of opt and setting, else def.
func orDefault(opt, setting, def time.Duration) time.Duration {
	switch {
	case opt > 0:
		return opt
	case setting > 0:
		return setting
	}
	return def
}

// setTransport picks the base RoundTripper: the one of hc if set, else a
// keep-alive transport of the client's own with mcp.tls applied.
func (c *Client) setTransport(pl config.Plugin, hc *http.Client) error {
	if hc != nil {
		c.base = hc.Transport
		if c.base == nil {
			c.base = http.DefaultTransport
		}
		return nil
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = maxIdleConns
	if pl.MCP.TLS != nil {
		tc, err := tlsConfig(pl.MCP.TLS)
		if err != nil {
			return fmt.Errorf("mcp.tls: %w", err)
		}
		t.TLSClientConfig = tc
	}
	c.base, c.owned = t, t
	return nil
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

// Name returns the plugin's name.
func (c *Client) Name() string { return c.name }

// Start connects in the background and returns at once. A plugin that
// cannot be reached is marked Down and keeps being retried; it becomes Ready
// when it comes up. Background goroutines stop when Close is called or ctx
// is done. Calls after the first, or after Close, are no-ops.
func (c *Client) Start(ctx context.Context) {
	c.startOnce.Do(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.cancel != nil { // closed before start
			return
		}
		bg, cancel := context.WithCancel(ctx)
		c.cancel = cancel
		c.sup.Start(bg)
		if c.health > 0 {
			c.wg.Add(1)
			go c.healthLoop(bg)
		}
	})
}

// Invoke runs hook with payload and context pctx (nil: an empty context). It
// uses the shared session, waits for a rebuild in progress, and retries once
// on a new session if the session was lost (see the package doc for what
// counts as lost; an answer about the call is never retried).
//
// The call is bounded by ctx's deadline, or by the plugin timeout if ctx has
// none. Errors wrap ErrPluginDown (circuit open), ErrTimeout,
// ErrInvalidReply, ErrRefused, ErrClosed or ErrNotStarted, or describe a
// transport or protocol failure. A plugin's error reply is returned as the
// reply, with a nil error.
func (c *Client) Invoke(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	return c.invoke(ctx, hook, payload, pctx)
}

// Effective returns the merged config (remote, then local overrides), or
// the local config before the plugin ever connected. It shares its slices
// and maps with the client: do not modify them.
func (c *Client) Effective() config.Plugin { return *c.effective.Load() }

// Generation increases whenever Effective changes (a plugin connected or
// reconnected with a different remote config). Callers on the request path
// compare it with the generation they planned for.
func (c *Client) Generation() uint64 { return c.generation.Load() }

// setEffective records the merged config, bumping the generation if it
// changed.
func (c *Client) setEffective(merged config.Plugin) {
	if !reflect.DeepEqual(*c.effective.Load(), merged) {
		c.effective.Store(&merged)
		c.generation.Add(1)
	}
}

// State returns the connection state.
func (c *Client) State() State { return c.sup.State() }

// Stats returns the counters.
func (c *Client) Stats() Stats { return c.count.stats(c.sup.State()) }

// Close stops the background loops and closes the session: a live session
// gets a DELETE, a lost one does not. Calls in flight fail with ErrClosed or
// their own error. Close is bounded by ctx and returns ctx.Err() if ctx ends
// first. Later calls return the first call's result.
func (c *Client) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		if c.cancel == nil {
			c.cancel = func() {} // Start becomes a no-op
		}
		cancel := c.cancel
		c.mu.Unlock()
		cancel()

		done := make(chan struct{})
		go func() {
			defer close(done)
			c.sup.Close()
			if s := c.current(); s != nil {
				if err := s.close(ctx); err != nil {
					c.log.Debug().Err(err).Msg("close plugin session")
				}
			}
			c.wg.Wait()
			if c.owned != nil {
				c.owned.CloseIdleConnections()
			}
		}()
		select {
		case <-done:
		case <-ctx.Done():
			c.closeErr = fmt.Errorf("close plugin %s: %w", c.name, ctx.Err())
		}
	})
	return c.closeErr
}

func (c *Client) supervisorConfig(attempts int, backoff reconnect.Backoff) reconnect.Config {
	return reconnect.Config{
		Connect:  c.connect,
		Attempts: attempts,
		Backoff:  backoff,
		OnRebuild: func() {
			ev := c.log.Warn()
			if cause := c.lossCause.Load(); cause != nil {
				ev = ev.AnErr("cause", *cause)
			}
			ev.Msg("plugin session lost; rebuilding")
			c.ev.rebuild()
		},
		OnAttemptFailed: func(attempt int, err error) {
			c.log.Debug().Int("attempt", attempt).Err(err).Msg("plugin connect attempt failed")
		},
		OnStateChange: func(from, to reconnect.State) {
			switch {
			case to == reconnect.Down:
				c.log.Error().Stringer("from", from).Msg("plugin down: circuit open, requests fail at once while reconnecting in the background")
			case from == reconnect.Down:
				c.log.Info().Msg("plugin back: circuit closed")
			}
			c.ev.stateChange(from, to)
		},
	}
}

// connect establishes a new session (initialize, get_plugin_config, merge)
// and installs it as connection epoch. It implements reconnect.Config.Connect.
func (c *Client) connect(ctx context.Context, epoch uint64) error {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rt := newSessionRT(c.base)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   c.url,
		HTTPClient: &http.Client{Transport: rt},
		// The SDK's own retries (SSE resumption, 1 s+ backoff) would hide a
		// dead server from us for seconds; we rebuild the session instead.
		MaxRetries: -1,
		// Plugins never send server-initiated messages we need. The
		// standalone GET stream would hold a connection and a goroutine
		// per plugin and reconnect on its own schedule; health checks
		// find dead sessions instead.
		DisableStandaloneSSE: true,
	}
	cs, err := c.mcp.Connect(actx, transport, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
	if err != nil {
		rt.retire(err)
		return fmt.Errorf("connect %s: %w", c.url, err)
	}
	s := newSession(cs, rt, epoch)
	res, err := cs.CallTool(actx, &mcp.CallToolParams{
		Name:      cpex.ToolGetPluginConfig,
		Arguments: map[string]string{"name": c.name},
	})
	var remote config.Plugin
	if err == nil {
		remote, err = parseRemoteConfig(res)
	}
	if err != nil {
		c.closeWhenIdle(ctx, s)
		return fmt.Errorf("%s: %w", cpex.ToolGetPluginConfig, err)
	}

	c.mu.Lock()
	old := c.cur
	c.cur = s
	c.mu.Unlock()
	if old != nil {
		c.closeWhenIdle(ctx, old)
	}
	c.count.connects.Add(1)
	c.setEffective(merge(c.local, remote))
	c.log.Info().Uint64("epoch", epoch).Str("session", cs.ID()).Msg("plugin session established")
	return nil
}

// current returns the installed session.
func (c *Client) current() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// acquire waits for a usable session and enters a call on it; the caller
// must leave it.
func (c *Client) acquire(ctx context.Context) (*session, error) {
	if _, err := c.sup.Acquire(ctx); err != nil {
		return nil, err
	}
	return c.enterCurrent()
}

// enterCurrent enters a call on the installed session. A session found
// retiring has been replaced already: its successor is taken instead.
func (c *Client) enterCurrent() (*session, error) {
	for {
		s := c.current()
		if s == nil {
			return nil, fmt.Errorf("%w: no session", ErrPluginDown) // not reached: Ready implies a session
		}
		if s.enter() {
			return s, nil
		}
	}
}
