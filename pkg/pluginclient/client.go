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
	"github.com/mcp-extproc/mcp-extproc/pkg/endpoints"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/mcpconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/reconnect"
	"github.com/mcp-extproc/mcp-extproc/pkg/tlsconfig"
)

// DefaultSlots is the default of Options.Slots: the sessions (connections)
// a client keeps to one plugin. An MCP session on a Service address carries
// one call at a time (one connection, see mcpconn), so this is also how many calls to one plugin run at once from one
// sidecar; 8 spreads over the 2 to 4 replicas a plugin usually runs (2 to 4
// sessions each, so one restart leaves most of them working), keeps the
// plugin's session count per sidecar small (a Python server holds a task
// per session), and covers the concurrency one sidecar's plugin calls
// reach on 2 cores (16 streams measured).
const DefaultSlots = 8

// Client is the client of one external plugin: a few slots, each holding
// one connection (an MCP session, a gRPC connection, Unix-socket
// connections) replaced through its own reconnect.Supervisor (single flight rebuild,
// backoff, circuit breaker) when it is lost. Calls go to the ready slot
// with the fewest calls in flight. It is safe for concurrent use.
type Client struct {
	name    string
	local   config.Plugin
	timeout time.Duration // default per-call timeout
	health  time.Duration // health check interval; <= 0: none
	log     zerolog.Logger
	count   counters
	ev      events

	size     int // slots wanted
	attempts int
	backoff  reconnect.Backoff
	dialer   Dialer             // Options.Dialer: fixed slots, no endpoints
	watcher  *endpoints.Watcher // MCP without HTTPClient: slots follow its addresses

	// MCP transport.
	url, port string
	mcp       *mcp.Client
	base      http.RoundTripper // Options.HTTPClient's: shared, not pinned
	tmpl      *http.Transport   // sessions' own transports are made from it

	slots atomic.Pointer[[]*slot] // the slots taking calls
	next  atomic.Uint64           // round-robin start among equals

	mu       sync.Mutex // slot set changes, state, life cycle
	bg       context.Context
	cancel   context.CancelFunc // set by Start (or Close before Start)
	resolved chan struct{}      // closed at the first endpoint lookup
	once     sync.Once          // closes resolved
	state    State              // the plugin's state, as last reported
	closed   bool
	evMu     sync.Mutex   // orders state reports
	draining atomic.Int64 // slots draining

	// effective is the merged config; generation counts its changes.
	effective  atomic.Pointer[config.Plugin]
	generation atomic.Uint64

	startOnce, closeOnce sync.Once
	closeErr             error

	wg sync.WaitGroup // health loop, endpoint watcher, background closes
}

// New validates pl and prepares its client. The transport follows pl's
// section: mcp (STREAMABLEHTTP, an http(s) url) speaks MCP Streamable HTTP;
// grpc and unix_socket dial cpex's protobuf transports (one slot each, see
// wire.go); Options.Dialer, if set, replaces all of them. Anything else is
// an error. Nothing is connected until Start.
func New(pl config.Plugin, settings config.PluginSettings, opts Options) (*Client, error) {
	wire, isWire, err := wireFor(pl, opts.Slots)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: %w", pl.Name, err)
	}
	if isWire && opts.Dialer == nil {
		opts.Dialer, opts.Slots = wire.dial, wire.slots
	}
	if !isWire && opts.Dialer == nil { // mcp.proto STDIO and SSE: stream.go
		d, ok, err := streamFor(pl, opts.Logger.With().Str("plugin", pl.Name).Logger())
		if err != nil {
			return nil, fmt.Errorf("plugin %q: %w", pl.Name, err)
		}
		if ok {
			opts.Dialer, opts.Slots = d, 1
		}
	}
	if err := validate(pl, opts.Dialer != nil); err != nil {
		return nil, fmt.Errorf("plugin %q: %w", pl.Name, err)
	}
	c := &Client{
		name:     pl.Name,
		local:    pl,
		timeout:  orDefault(opts.PluginTimeout, settings.Timeout(), config.DefaultPluginTimeout),
		health:   settings.HealthCheckInterval(),
		log:      opts.Logger.With().Str("plugin", pl.Name).Logger(),
		size:     opts.Slots,
		dialer:   opts.Dialer,
		resolved: make(chan struct{}),
	}
	if c.size <= 0 {
		c.size = DefaultSlots
	}
	if opts.HealthCheckInterval != 0 {
		c.health = opts.HealthCheckInterval
	}
	c.ev = events{name: pl.Name, count: &c.count, obs: opts.Observer}
	c.effective.Store(&pl)
	c.attempts = 1
	var delay time.Duration
	switch {
	case pl.MCP != nil:
		c.attempts, delay = pl.MCP.Attempts(), pl.MCP.Delay()
	case isWire:
		c.attempts, delay = wire.attempts, wire.delay
	}
	c.backoff = reconnect.Backoff{Base: delay, Max: orDefault(opts.MaxReconnectDelay, 0, DefaultMaxReconnectDelay)}
	if c.dialer == nil {
		if err := c.setMCP(pl, opts); err != nil {
			return nil, fmt.Errorf("plugin %q: %w", pl.Name, err)
		}
	}
	if c.watcher == nil {
		c.setFixedSlots()
	}
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

// setMCP prepares the MCP transport: the base RoundTripper of
// Options.HTTPClient if set (shared by the sessions, fixed slots), else a
// template for the sessions' own transports with mcp.tls applied and an endpoint
// watcher on the URL's host.
func (c *Client) setMCP(pl config.Plugin, opts Options) error {
	c.url = pl.MCP.URL
	c.mcp = mcp.NewClient(&mcp.Implementation{Name: "mcp-extproc", Version: "0.1.0"},
		&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	if hc := opts.HTTPClient; hc != nil {
		c.base = hc.Transport
		if c.base == nil {
			c.base = http.DefaultTransport
		}
		return nil
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	if pl.MCP.TLS != nil {
		tc, err := tlsconfig.Client(pl.MCP.TLS)
		if err != nil {
			return fmt.Errorf("mcp.tls: %w", err)
		}
		t.TLSClientConfig = tc
	}
	c.tmpl = t
	host, port, err := endpoints.HostPort(c.url)
	if err != nil {
		return err
	}
	c.port = port
	c.watcher = endpoints.New(host, endpoints.Options{
		Resolver: c.resolver(opts.Resolver), Interval: opts.ResolveInterval, OnChange: c.endpointsChanged,
	})
	return nil
}

// setFixedSlots makes the slots of a client without endpoints.
func (c *Client) setFixedSlots() {
	slots := make([]*slot, c.size)
	for i := range slots {
		d := c.dialer
		if d == nil {
			d = c.dialMCP("", false)
		}
		slots[i] = c.newSlot("", d)
	}
	c.slots.Store(&slots)
	c.once.Do(func() { close(c.resolved) })
}

// validate checks that pl is a plugin this client can serve; with a custom
// dialer, only its name is checked.
func validate(pl config.Plugin, custom bool) error {
	if pl.Name == "" {
		return errors.New("no name")
	}
	if custom {
		return nil
	}
	if !pl.External() {
		return fmt.Errorf("kind %q is not supported (only external plugins)", pl.Kind)
	}
	if pl.MCP == nil {
		return errors.New("kind external needs an mcp, grpc or unix_socket section")
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

// dialMCP returns the Dialer of a slot: a new MCP session to the plugin
// URL, dialled to addr if not empty (direct: addr is one replica).
func (c *Client) dialMCP(addr string, direct bool) Dialer {
	cfg := mcpconn.Config{
		URL: c.url, Client: c.mcp, Base: c.base, Template: c.tmpl,
		Addr: addr, Port: c.port, Direct: direct,
	}
	return func(ctx context.Context) (Conn, error) {
		s, err := mcpconn.Dial(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
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
		c.bg, c.cancel = context.WithCancel(ctx)
		for _, sl := range c.current() {
			sl.sup.Start(c.bg)
		}
		if c.watcher != nil {
			c.wg.Go(func() { _ = c.watcher.Run(c.bg) })
		}
		if c.health > 0 {
			c.wg.Go(func() { c.healthLoop(c.bg) })
		}
	})
}

// Invoke runs hook with payload and context pctx (nil: an empty context) on
// the ready slot with the fewest calls in flight, waiting for a rebuild in
// progress when no slot is ready, and retries once (on another slot if one
// is ready) if the connection was lost (see the package doc for what counts
// as lost; an answer about the call is never retried).
//
// The call is bounded by ctx's deadline, or by the plugin timeout if ctx has
// none. Errors wrap ErrPluginDown (every slot's circuit open), ErrTimeout,
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

// State returns the plugin's state: Ready while any slot is, Down when every
// slot's circuit is open (or no endpoint is known), else Connecting. It is
// read from the slots themselves, so a call that just failed with
// ErrPluginDown never sees Ready here (the state reported to the Observer
// follows a moment later); after Close it is the last state reported.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.state
	}
	return aggregate(c.current(), c.isResolved())
}

// Stats returns the counters.
func (c *Client) Stats() Stats {
	st := c.count.stats(c.State())
	st.Sessions = c.sessions()
	return st
}

// Close stops the background loops and closes every connection: a live MCP
// session gets a DELETE, a lost one does not. Calls in flight fail with
// ErrClosed or their own error. Close is bounded by ctx and returns
// ctx.Err() if ctx ends first. Later calls return the first call's result.
func (c *Client) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		if c.cancel == nil {
			c.bg, c.cancel = context.WithCancel(context.Background()) // Start becomes a no-op
		}
		cancel := c.cancel
		c.closed = true
		slots := c.current()
		c.slots.Store(&[]*slot{})
		c.mu.Unlock()

		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, sl := range slots {
				sl.sup.Close()
				sl.draining.Store(true)
			}
			for _, sl := range slots {
				if h := sl.current(); h != nil {
					h.retire()
					if err := h.close(); err != nil {
						c.log.Debug().Err(err).Msg("close plugin connection")
					}
				}
			}
			cancel()
			c.wg.Wait()
			c.ev.sessions(nil)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			c.closeErr = fmt.Errorf("close plugin %s: %w", c.name, ctx.Err())
		}
	})
	return c.closeErr
}

// current returns the slots taking calls.
func (c *Client) current() []*slot {
	if p := c.slots.Load(); p != nil {
		return *p
	}
	return nil
}
