package mcpconn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
)

// Config says how to reach a plugin server's MCP endpoint.
type Config struct {
	// URL is the plugin's MCP endpoint (mcp.url).
	URL string
	// Client is the go-sdk client the sessions are made with.
	Client *mcp.Client
	// Base, if set, carries the requests of every session (a caller's
	// http.Client transport); Template, Addr and Direct are then unused.
	Base http.RoundTripper
	// Template is the transport (TLS, timeouts) each session's own
	// transport is cloned from when Base is nil.
	Template *http.Transport
	// Addr, if not empty, is the endpoint address to dial instead of the
	// URL's host (a bare host is joined with Port); the URL's host stays the
	// Host header and the TLS server name.
	Addr, Port string
	// Direct says Addr is one replica (a Pod of a headless Service): its
	// sessions may use several connections at once.
	Direct bool
}

// Session is one MCP session to a plugin server: a [wireconn.Conn].
type Session struct {
	cs   *mcp.ClientSession
	rt   *sessionRT
	tr   *transport  // nil when Config.Base carries the requests
	post *postCaller // makes invoke_hook calls; nil: the go-sdk does (post.go)
}

// The MCP session is a Conn.
var _ wireconn.Conn = (*Session)(nil)

// Dial connects a new session, bounded by ctx. The go-sdk asks
// server/discover first and uses a 2026-07-28 server statelessly (no
// initialize, nothing to lose); older servers get the 2025-11-25
// initialize.
func Dial(ctx context.Context, cfg Config) (*Session, error) {
	base, tr := cfg.Base, (*transport)(nil)
	var dials func() int64
	if base == nil {
		tr = newTransport(cfg.Template, cfg.Addr, cfg.Port, cfg.Direct)
		base, dials = tr, tr.dials.Load
	}
	rt := newSessionRT(base, dials)
	st := &mcp.StreamableClientTransport{
		Endpoint:   cfg.URL,
		HTTPClient: &http.Client{Transport: rt},
		// The SDK's own retries (SSE resumption, 1 s+ backoff) would
		// hide a dead server for seconds; the client recovers instead.
		MaxRetries: -1,
		// Plugins never send server-initiated messages we need. The
		// standalone GET stream would hold the session's one connection.
		DisableStandaloneSSE: true,
	}
	cs, err := cfg.Client.Connect(ctx, st, nil)
	if err != nil {
		rt.retire(err)
		tr.close()
		return nil, fmt.Errorf("connect %s: %w", cfg.URL, err)
	}
	return &Session{cs: cs, rt: rt, tr: tr, post: newPostCaller(rt.ctx, cs, cfg.URL, rt)}, nil
}

// PluginConfig implements [wireconn.Conn] with the get_plugin_config tool.
func (s *Session) PluginConfig(ctx context.Context, name string) (json.RawMessage, bool, error) {
	ctx, ex := withCallRecord(ctx)
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      cpex.ToolGetPluginConfig,
		Arguments: map[string]string{"name": name},
	})
	if err != nil {
		return nil, false, s.classify(ctx, err, ex)
	}
	return configJSON(sdkResult(res))
}

// InvokeHook implements [wireconn.Conn] with the invoke_hook tool: one call,
// never retried here. Its error wraps ErrConnLost when the server said the
// session is gone, ErrNoAnswer when nothing answered, else it is the
// answer's.
func (s *Session) InvokeHook(ctx context.Context, hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	ctx, ex := withCallRecord(ctx)
	params := invokeParams(ctx, hook, plugin, payload, pctx)
	var res *toolResult
	var err error
	if s.post != nil {
		res, err = s.post.call(ctx, ex, params)
	} else {
		var r *mcp.CallToolResult
		r, err = s.cs.CallTool(ctx, params)
		res = sdkResult(r)
	}
	if err != nil {
		return nil, s.classify(ctx, err, ex)
	}
	return parseInvokeReply(res)
}

// Health implements [wireconn.Conn] with an MCP ping: the probe of whether
// the session still lives. A ping that gets no answer means the server
// cannot be reached: ErrConnLost.
func (s *Session) Health(ctx context.Context) error {
	ctx, ex := withCallRecord(ctx)
	err := s.cs.Ping(ctx, nil)
	if err == nil {
		return nil
	}
	err = s.classify(ctx, err, ex)
	if errors.Is(err, wireconn.ErrNoAnswer) {
		return fmt.Errorf("%w: %w", wireconn.ErrConnLost, err)
	}
	return err
}

// Close implements [wireconn.Conn]: requests in flight are aborted and,
// unless the server said the session is gone, a DELETE bounded by
// deleteTimeout tells the server.
func (s *Session) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	s.rt.shutdown(ctx)
	err := s.cs.Close()
	s.post.close()
	s.tr.close()
	return err
}

// Abandon closes the session without telling the server (no DELETE): for
// a session found lost, which the server no longer knows or cannot be
// reached.
func (s *Session) Abandon() error {
	s.rt.retire(errSessionRetired)
	err := s.cs.Close()
	s.post.close()
	s.tr.close()
	return err
}

// deleteTimeout bounds the DELETE that ends a live session. It is
// best-effort: a server that does not answer must not hold up Close.
const deleteTimeout = time.Second

// classify turns the error of a call on s (ex: what its requests got) into
// the wireconn vocabulary; a context error is returned as is.
func (s *Session) classify(ctx context.Context, err error, ex *callRecord) error {
	switch {
	case ctx.Err() != nil:
		return err
	case ex.gone.Load() || s.rt.lostErr() != nil:
		return fmt.Errorf("%w: %w", wireconn.ErrConnLost, s.lossCause(err))
	case answered(err, ex):
		return answerError(err)
	case s.rt.ctx.Err() != nil:
		return fmt.Errorf("%w: session closed: %w", wireconn.ErrConnLost, err)
	case errors.Is(err, mcp.ErrSessionMissing):
		return fmt.Errorf("%w: %w: %w", wireconn.ErrConnLost, wireconn.ErrSessionGone, err)
	case errors.Is(err, mcp.ErrConnectionClosed):
		return fmt.Errorf("%w: %w", wireconn.ErrConnLost, err)
	}
	return fmt.Errorf("%w: %w", wireconn.ErrNoAnswer, err)
}

// lossCause returns the best description of why s is gone.
func (s *Session) lossCause(err error) error {
	if c := s.rt.lostErr(); c != nil {
		return c
	}
	return err
}

// invokeParams are the tools/call params of invoke_hook, carrying ctx's
// trace context in _meta (traceMeta).
func invokeParams(ctx context.Context, hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext) *mcp.CallToolParams {
	return &mcp.CallToolParams{
		Meta: traceMeta(ctx),
		Name: cpex.ToolInvokeHook,
		Arguments: cpex.InvokeHookArgs{
			HookType:   hook,
			PluginName: plugin,
			Payload:    payload,
			Context:    pctx,
		},
	}
}

// traceMeta returns the _meta of a request made under ctx: the W3C trace
// context of ctx's span context under the keys SEP-414 reserves
// (traceparent, and tracestate when not empty), the same on every MCP
// transport (Streamable HTTP, stateless, legacy SSE, STDIO). Nil when ctx
// carries no valid span context, without allocating. The go-sdk adds its
// own keys (2026-07-28's protocolVersion) to the map, so each call gets
// its own.
func traceMeta(ctx context.Context) mcp.Meta {
	parent, state := wireconn.TraceContext(ctx)
	if parent == "" {
		return nil
	}
	m := mcp.Meta{wireconn.TraceparentKey: parent}
	if state != "" {
		m[wireconn.TracestateKey] = state
	}
	return m
}
