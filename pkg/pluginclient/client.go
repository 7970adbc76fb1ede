package pluginclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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

// client is the MCP client of one plugin: one long-lived session shared by
// all callers, replaced through the supervisor when it is lost.
type client struct {
	pool    *Pool
	index   int // position in the local config
	name    string
	local   config.Plugin
	url     string
	base    http.RoundTripper // shared by all sessions: connection reuse
	mcp     *mcp.Client
	timeout time.Duration // default per-call timeout
	health  time.Duration // health check interval; <= 0: none
	log     zerolog.Logger
	obs     Observer
	sup     *reconnect.Supervisor

	mu  sync.Mutex
	cur *session // nil before the first connection

	lossCause atomic.Pointer[error] // the last session loss reported, for logs

	connects, rebuilds, retries, retryFailures, circuitOpens atomic.Uint64
	healthOK, healthFailed                                   atomic.Uint64

	wg sync.WaitGroup // health loop and background session closes
}

// session is one MCP session with its RoundTripper. A replaced session is
// retiring: it takes no new calls, and is closed once the calls in flight on
// it are done (see closeWhenIdle).
type session struct {
	cs  *mcp.ClientSession
	rt  *sessionRT
	gen uint64

	mu       sync.Mutex
	active   int           // calls in flight
	retiring bool          // replaced: no new calls
	idle     chan struct{} // closed once retiring with no call in flight
}

func newSession(cs *mcp.ClientSession, rt *sessionRT, gen uint64) *session {
	return &session{cs: cs, rt: rt, gen: gen, idle: make(chan struct{})}
}

// enter registers a call on s; it fails once s is retiring.
func (s *session) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retiring {
		return false
	}
	s.active++
	return true
}

// leave ends a call registered by enter.
func (s *session) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active--
	if s.retiring && s.active == 0 {
		close(s.idle)
	}
}

// retire stops s taking calls and returns a channel closed once the calls
// in flight on it are done.
func (s *session) retire() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.retiring {
		s.retiring = true
		if s.active == 0 {
			close(s.idle)
		}
	}
	return s.idle
}

// lost reports whether err (from a call on s) means the session is gone:
// the RoundTripper saw it go, the SDK says so, or s was retired or closed
// while the call ran.
func (s *session) lost(err error) bool {
	return s.rt.lostErr() != nil || s.rt.ctx.Err() != nil ||
		errors.Is(err, mcp.ErrSessionMissing) ||
		errors.Is(err, mcp.ErrConnectionClosed)
}

// cause returns the best description of why s is lost.
func (s *session) cause(err error) error {
	if c := s.rt.lostErr(); c != nil {
		return c
	}
	return err
}

// close ends the session: requests in flight are aborted and, unless the
// session is lost, a DELETE bounded by ctx and deleteTimeout tells the
// server.
func (s *session) close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	s.rt.shutdown(ctx)
	return s.cs.Close()
}

func (c *client) supervisorConfig(attempts int, backoff reconnect.Backoff) reconnect.Config {
	return reconnect.Config{
		Connect:  c.connect,
		Attempts: attempts,
		Backoff:  backoff,
		OnRebuild: func() {
			c.rebuilds.Add(1)
			ev := c.log.Warn()
			if cause := c.lossCause.Load(); cause != nil {
				ev = ev.AnErr("cause", *cause)
			}
			ev.Msg("plugin session lost; rebuilding")
			c.obs.OnRebuild(c.name)
		},
		OnAttemptFailed: func(attempt int, err error) {
			c.log.Debug().Int("attempt", attempt).Err(err).Msg("plugin connect attempt failed")
		},
		OnStateChange: func(from, to reconnect.State) {
			switch {
			case to == reconnect.Down:
				c.circuitOpens.Add(1)
				c.log.Error().Stringer("from", from).Msg("plugin down: circuit open, requests fail at once while reconnecting in the background")
			case from == reconnect.Down:
				c.log.Info().Msg("plugin back: circuit closed")
			}
			c.obs.OnStateChange(c.name, from, to)
		},
	}
}

// connect establishes a new session (initialize, get_plugin_config, merge)
// and installs it as generation gen. It implements reconnect.Config.Connect.
func (c *client) connect(ctx context.Context, gen uint64) error {
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
	s := newSession(cs, rt, gen)
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
	c.connects.Add(1)
	c.pool.setEffective(c.index, merge(c.local, remote))
	c.log.Info().Uint64("generation", gen).Str("session", cs.ID()).Msg("plugin session established")
	return nil
}

// closeWhenIdle retires s and closes it in the background once the calls in
// flight on it are done, so that a rebuild never fails them: they finish on
// s (a dead server fails them by itself, and they are retried on the new
// session). The wait is bounded by the plugin timeout (the longest a call
// without its own deadline runs) plus deleteTimeout, and ends at once when
// ctx (the client's life) ends.
func (c *client) closeWhenIdle(ctx context.Context, s *session) {
	idle := s.retire()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTimer(c.timeout + deleteTimeout)
		defer t.Stop()
		select {
		case <-idle:
		case <-t.C:
			c.log.Debug().Msg("closing a replaced plugin session with calls still in flight")
		case <-ctx.Done():
		}
		if err := s.close(context.WithoutCancel(ctx)); err != nil {
			c.log.Debug().Err(err).Msg("close plugin session")
		}
	}()
}

// current returns the installed session.
func (c *client) current() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// acquire waits for a usable session and enters a call on it; the caller
// must leave it.
func (c *client) acquire(ctx context.Context) (*session, error) {
	if _, err := c.sup.Acquire(ctx); err != nil {
		return nil, err
	}
	return c.enterCurrent()
}

// enterCurrent enters a call on the installed session. A session found
// retiring has been replaced already: its successor is taken instead.
func (c *client) enterCurrent() (*session, error) {
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

// invoke runs invoke_hook, rebuilding the session and retrying once if it was
// lost.
func (c *client) invoke(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	if _, ok := ctx.Deadline(); !ok && c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	if pctx == nil {
		pctx = cpex.NewContext(cpex.GlobalContext{})
	}
	params := &mcp.CallToolParams{
		Name: cpex.ToolInvokeHook,
		Arguments: cpex.InvokeHookArgs{
			HookType:   hook,
			PluginName: c.name,
			Payload:    payload,
			Context:    pctx,
		},
	}

	s, err := c.acquire(ctx)
	if err != nil {
		return nil, c.wrap(ctx, err)
	}
	reply, ex, err := c.call(ctx, s, params)
	if err == nil || ctx.Err() != nil {
		s.leave()
		return reply, c.wrap(ctx, err)
	}
	switch {
	case ex.gone.Load():
		// This call's own answer said the session is gone: rebuild.
	case answered(err, ex):
		// The server answered this call: whatever it said is the call's
		// error. Calling again would run the plugin twice.
		s.leave()
		return nil, c.wrap(ctx, answerError(err))
	case !s.lost(err):
		// No answer arrived, yet nothing on the wire said the session is
		// gone: a server shutting down ends its SSE streams cleanly before
		// its listener goes away. Ask the session; if it answers, the call
		// is retried on it once, otherwise the lost-session path below
		// rebuilds it.
		perr := s.cs.Ping(ctx, nil)
		if perr == nil || !s.lost(perr) {
			c.retries.Add(1)
			reply, _, err = c.call(ctx, s, params)
			s.leave()
			c.obs.OnRetry(c.name, err == nil)
			if err != nil {
				c.retryFailures.Add(1)
			}
			return reply, c.wrap(ctx, err)
		}
		err = perr
	}
	s.leave()

	// The session is gone: one rebuild for all callers, then one retry.
	cause := s.cause(err)
	c.lossCause.Store(&cause)
	if err := c.sup.Rebuild(ctx, s.gen); err != nil {
		return nil, c.wrap(ctx, err)
	}
	if s, err = c.enterCurrent(); err != nil {
		return nil, c.wrap(ctx, err)
	}
	defer s.leave()
	c.retries.Add(1)
	reply, _, err = c.call(ctx, s, params)
	if err != nil {
		c.retryFailures.Add(1)
		c.log.Warn().Err(err).Uint64("generation", s.gen).Msg("plugin call failed again on the rebuilt session")
	}
	c.obs.OnRetry(c.name, err == nil)
	return reply, c.wrap(ctx, err)
}

// answered reports whether err is the server's answer to the call (as
// opposed to no answer at all): a JSON-RPC error, a refusal, a reply that
// is not a valid invoke_hook reply, or anything after a whole JSON body
// arrived.
func answered(err error, ex *exchange) bool {
	return ex.answered.Load() || serverError(err) ||
		errors.Is(err, ErrInvalidReply) || errors.Is(err, ErrRefused)
}

// answerError is the call's error for an answer: an answer that is neither
// a JSON-RPC error nor a refusal could not be understood, hence invalid.
func answerError(err error) error {
	if serverError(err) || errors.Is(err, ErrInvalidReply) || errors.Is(err, ErrRefused) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrInvalidReply, err)
}

// sdkCodes are the codes of the go-sdk's own jsonrpc.Error values (client
// closing, server closing, rejected by transport): errors made on this side
// of the wire, not answers.
var sdkCodes = map[int64]bool{-32003: true, -32004: true, -32005: true}

// serverError reports whether err's tree holds a JSON-RPC error the server
// sent.
func serverError(err error) bool {
	var we *jsonrpc.Error
	if errors.As(err, &we) && !sdkCodes[we.Code] {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if serverError(e) {
				return true
			}
		}
	case interface{ Unwrap() error }:
		return serverError(u.Unwrap())
	}
	return false
}

// call makes one invoke_hook call on s, returning what the wire said of it.
func (c *client) call(ctx context.Context, s *session, params *mcp.CallToolParams) (*cpex.InvokeHookReply, *exchange, error) {
	ctx, ex := withExchange(ctx)
	res, err := s.cs.CallTool(ctx, params)
	if err != nil {
		return nil, ex, err
	}
	reply, err := parseInvokeReply(res)
	return reply, ex, err
}

// wrap maps err to the package's sentinels, naming the plugin. Context
// errors are judged from ctx itself, not from err's chain.
func (c *client) wrap(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("plugin %s: %w: %w", c.name, ErrTimeout, context.DeadlineExceeded)
	case ctx.Err() != nil:
		return fmt.Errorf("plugin %s: %w", c.name, ctx.Err())
	case errors.Is(err, reconnect.ErrOpen):
		return fmt.Errorf("plugin %s: %w: %v", c.name, ErrPluginDown, err)
	case errors.Is(err, reconnect.ErrStopped):
		return fmt.Errorf("plugin %s: %w", c.name, ErrClosed)
	case errors.Is(err, reconnect.ErrNotStarted):
		return fmt.Errorf("plugin %s: %w", c.name, ErrNotStarted)
	}
	return fmt.Errorf("plugin %s: %w", c.name, err)
}

// healthLoop pings the plugin every interval until ctx is done.
func (c *client) healthLoop(ctx context.Context) {
	defer c.wg.Done()
	t := time.NewTicker(c.health)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.healthCheck(ctx)
	}
}

// healthCheck pings the current session once. A lost session is rebuilt
// right away, before a request finds it dead. While the circuit is open or
// the first connection is pending, the supervisor's loop does the probing.
func (c *client) healthCheck(ctx context.Context) {
	if c.sup.State() != reconnect.Ready {
		return
	}
	s, err := c.acquire(ctx)
	if err != nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, min(c.timeout, c.health))
	err = s.cs.Ping(pctx, nil)
	cancel()
	s.leave()
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		c.healthOK.Add(1)
		c.obs.OnHealthCheck(c.name, true)
		return
	}
	c.healthFailed.Add(1)
	c.obs.OnHealthCheck(c.name, false)
	c.log.Warn().Err(err).Msg("plugin health check failed")
	if s.lost(err) {
		cause := s.cause(err)
		c.lossCause.Store(&cause)
		_ = c.sup.Rebuild(ctx, s.gen) // outcome logged by the supervisor hooks
	}
}

// stats returns the counters.
func (c *client) stats() Stats {
	return Stats{
		State:              c.sup.State(),
		Connects:           c.connects.Load(),
		Rebuilds:           c.rebuilds.Load(),
		Retries:            c.retries.Load(),
		RetryFailures:      c.retryFailures.Load(),
		CircuitOpens:       c.circuitOpens.Load(),
		HealthChecksOK:     c.healthOK.Load(),
		HealthChecksFailed: c.healthFailed.Load(),
	}
}
