// Package pluginserver is the server side of the ContextForge (cpex) external
// plugin protocol: an MCP server, on the go-sdk, exposing the tools
// get_plugin_configs, get_plugin_config and invoke_hook for a set of Go
// plugins (docs/plugin-protocol.md §1–3).
//
// Replies are encoded as the Python servers encode them: one TextContent
// block holding the JSON, no structuredContent. The HTTP endpoint is the
// go-sdk Streamable HTTP handler, answering over SSE by default, like Python
// servers, or with application/json when [Options.JSONResponse] is set.
//
// # Stateful and stateless
//
// By default the handler is stateful: initialize creates a session
// (Mcp-Session-Id) that lives in this process, as in Python servers. A
// client asking for MCP 2026-07-28 first sends server/discover; the stateful
// handler answers it with the older versions only, and the client falls back
// to initialize.
//
// With [Options.Stateless] the handler keeps no sessions, so any replica of
// the plugin serves any call and nothing is lost when one restarts. A
// 2026-07-28 client discovers the server (server/discover) and sends every
// call self-contained, with no initialize. An older client still sends
// initialize: it is answered on a temporary session, without an
// Mcp-Session-Id, and every later request of that client is served the same
// way (GET and DELETE answer 405). Plugins must then keep no per-session
// state, which the cpex protocol never needs.
//
// # Trace context
//
// An invoke_hook's W3C trace context is read from each carrier its
// transport has — the MCP request's params._meta (SEP-414), the HTTP
// headers (Streamable HTTP), gRPC metadata; the Unix socket has none — and
// is given to the hook's ctx: [CallTraceFrom] says what each carrier
// brought, and the first valid one (_meta, then metadata, then header) is
// the remote parent span context unless a span is already current, so a
// plugin's own spans join the caller's trace.
//
// A plugin that panics or fails produces an error reply
// ({"plugin_name", "error": {...}}), never a crash or a JSON-RPC error.
package pluginserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Options configures a [Server]. The zero value is a sensible default.
type Options struct {
	// JSONResponse makes POST answers application/json instead of
	// text/event-stream (the default, as Python plugin servers answer).
	JSONResponse bool
	// Implementation names the server in the initialize result. Default:
	// {Name: "mcp-extproc-pluginserver", Version: "0.1.0"}.
	Implementation *mcp.Implementation
	// Logger receives plugin errors and panics. Nil: no logging.
	Logger *zerolog.Logger
	// SessionTimeout closes sessions idle for this long. Zero: never.
	SessionTimeout time.Duration
	// StructuredContent also sends each reply as structuredContent (a list
	// wrapped as {"result": [...]}, as FastMCP does with structured output),
	// to test clients against servers that do. Default: text only, like
	// the Python plugin servers.
	StructuredContent bool
	// Stateless serves without sessions (see the package documentation):
	// MCP 2026-07-28 natively, older protocol versions on a temporary
	// session per request. Default: stateful sessions, like Python servers.
	Stateless bool
}

// Server serves a fixed set of plugins. Create it with [New] or
// [NewWithOptions]; serve it with [Server.Handler].
type Server struct {
	opts    Options
	log     zerolog.Logger
	plugins []Plugin
	byName  map[string]Plugin // lower-cased name

	mu        sync.Mutex
	endpoints map[*endpoint]struct{}
}

// New returns a server for plugins with default options. It panics on a nil
// plugin or on two plugins whose names are equal ignoring case.
func New(plugins ...Plugin) *Server {
	return NewWithOptions(nil, plugins...)
}

// NewWithOptions is [New] with options; nil opts means the defaults.
func NewWithOptions(opts *Options, plugins ...Plugin) *Server {
	s := &Server{
		log:       zerolog.Nop(),
		byName:    make(map[string]Plugin, len(plugins)),
		endpoints: make(map[*endpoint]struct{}),
	}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Logger != nil {
		s.log = *s.opts.Logger
	}
	if s.opts.Implementation == nil {
		s.opts.Implementation = &mcp.Implementation{Name: "mcp-extproc-pluginserver", Version: "0.1.0"}
	}
	for _, p := range plugins {
		if p == nil {
			panic("pluginserver: nil plugin")
		}
		key := strings.ToLower(p.Name())
		if _, dup := s.byName[key]; dup {
			panic(fmt.Sprintf("pluginserver: duplicate plugin name %q", p.Name()))
		}
		s.byName[key] = p
		s.plugins = append(s.plugins, p)
	}
	return s
}

// Handler returns a new go-sdk Streamable HTTP handler (stateful unless
// [Options.Stateless]) serving the plugins; mount it at /mcp. Every call
// returns an independent endpoint with its own, empty session store, so a
// test can simulate a restarted plugin server by serving a fresh Handler,
// or replicas by serving several. The returned value also
// implements io.Closer: Close cancels running hooks, closes the endpoint's
// sessions and makes it answer 503 from then on.
func (s *Server) Handler() http.Handler {
	ep := s.newEndpoint()
	ep.http = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ep.mcp }, &mcp.StreamableHTTPOptions{
		Stateless:                    s.opts.Stateless,
		JSONResponse:                 s.opts.JSONResponse,
		SessionTimeout:               s.opts.SessionTimeout,
		PropagateRequestCancellation: true,
	})
	return ep
}

// newEndpoint returns a registered endpoint with its own mcp.Server; the
// caller sets how it is served.
func (s *Server) newEndpoint() *endpoint {
	ctx, cancel := context.WithCancel(context.Background())
	ep := &endpoint{srv: s, ctx: ctx, cancel: cancel}
	ep.mcp = mcp.NewServer(s.opts.Implementation, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{},
	})
	ep.addTools()
	s.mu.Lock()
	s.endpoints[ep] = struct{}{}
	s.mu.Unlock()
	return ep
}

// Close closes every endpoint returned by [Server.Handler] (see there).
func (s *Server) Close() error {
	s.mu.Lock()
	eps := make([]*endpoint, 0, len(s.endpoints))
	for ep := range s.endpoints {
		eps = append(eps, ep)
	}
	s.mu.Unlock()
	var errs []error
	for _, ep := range eps {
		errs = append(errs, ep.Close())
	}
	return errors.Join(errs...)
}

// Configs returns the configs of all plugins, in the order given to New.
func (s *Server) Configs() []map[string]any {
	out := make([]map[string]any, 0, len(s.plugins))
	for _, p := range s.plugins {
		out = append(out, p.Config())
	}
	return out
}

// lookup finds a plugin by name, ignoring case (New rejects names that
// differ only in case).
func (s *Server) lookup(name string) (Plugin, bool) {
	p, ok := s.byName[strings.ToLower(name)]
	return p, ok
}

// endpoint is one Handler: an mcp.Server and its streamable HTTP handler.
type endpoint struct {
	srv    *Server
	mcp    *mcp.Server
	http   http.Handler
	ctx    context.Context // cancelled by Close; bounds every hook
	cancel context.CancelFunc

	closeOnce sync.Once
}

// ServeHTTP implements http.Handler.
func (ep *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if ep.ctx.Err() != nil {
		http.Error(w, "plugin server endpoint closed", http.StatusServiceUnavailable)
		return
	}
	ep.http.ServeHTTP(w, r)
}

// Close implements io.Closer.
func (ep *endpoint) Close() error {
	var errs []error
	ep.closeOnce.Do(func() {
		ep.cancel()
		for ss := range ep.mcp.Sessions() {
			if err := ss.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close session %s: %w", ss.ID(), err))
			}
		}
		ep.srv.mu.Lock()
		delete(ep.srv.endpoints, ep)
		ep.srv.mu.Unlock()
	})
	return errors.Join(errs...)
}

var (
	noArgsSchema     = json.RawMessage(`{"type":"object","properties":{}}`)
	configArgsSchema = json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)
	invokeArgsSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"hook_type":{"type":"string"},"plugin_name":{"type":"string"},` +
		`"payload":{"type":"object"},"context":{"type":"object"}},` +
		`"required":["hook_type","plugin_name","payload","context"]}`)
)

func (ep *endpoint) addTools() {
	ep.mcp.AddTool(&mcp.Tool{
		Name:        cpex.ToolGetPluginConfigs,
		Description: "Return the configurations of all plugins served here.",
		InputSchema: noArgsSchema,
	}, ep.getPluginConfigs)
	ep.mcp.AddTool(&mcp.Tool{
		Name:        cpex.ToolGetPluginConfig,
		Description: "Return the configuration of one plugin (name matched ignoring case), or {} if unknown.",
		InputSchema: configArgsSchema,
	}, ep.getPluginConfig)
	ep.mcp.AddTool(&mcp.Tool{
		Name:        cpex.ToolInvokeHook,
		Description: "Run one hook of one plugin on a payload.",
		InputSchema: invokeArgsSchema,
	}, ep.invokeHook)
}

// textResult encodes v as the one TextContent block of a tool result (and
// as structuredContent if the options say so).
func (ep *endpoint) textResult(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("marshal tool result: %w", err)
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
	if ep.srv.opts.StructuredContent {
		var sc any = json.RawMessage(b)
		if len(b) > 0 && b[0] != '{' {
			sc = map[string]any{"result": json.RawMessage(b)}
		}
		res.StructuredContent = sc
	}
	return res, nil
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

func (ep *endpoint) getPluginConfigs(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return ep.textResult(ep.srv.Configs())
}

func (ep *endpoint) getPluginConfig(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Name string `json:"name"`
	}
	if raw := req.Params.Arguments; len(raw) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil {
			return errorResult(fmt.Sprintf("get_plugin_config: invalid arguments: %v", err)), nil
		}
	}
	p, ok := ep.srv.lookup(args.Name)
	if !ok {
		return ep.textResult(map[string]any{})
	}
	return ep.textResult(p.Config())
}

func (ep *endpoint) invokeHook(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ep.ctx, cancel)
	defer stop()
	return ep.textResult(ep.srv.Invoke(withCallTrace(ctx, mcpCallTrace(req)), req.Params.Arguments))
}

// Invoke runs the invoke_hook tool on its raw JSON arguments and returns the
// reply the tool sends. It never fails: every problem becomes an error reply.
func (s *Server) Invoke(ctx context.Context, rawArgs json.RawMessage) *cpex.InvokeHookReply {
	var args cpex.InvokeHookArgs
	if err := json.Unmarshal(rawArgs, &args); err != nil {
		return errorReply(args.PluginName, CodeInvalidArgs, fmt.Sprintf("invoke_hook: invalid arguments: %v", err))
	}
	return s.invoke(ctx, args)
}

// invoke runs decoded invoke_hook arguments; every transport ends here.
func (s *Server) invoke(ctx context.Context, args cpex.InvokeHookArgs) *cpex.InvokeHookReply {
	if args.PluginName == "" || args.HookType == "" {
		return errorReply(args.PluginName, CodeInvalidArgs, "invoke_hook: invalid arguments: hook_type and plugin_name are required")
	}
	p, ok := s.lookup(args.PluginName)
	if !ok {
		return errorReply(args.PluginName, CodeUnknownPlugin, fmt.Sprintf("unable to retrieve plugin %q to execute", args.PluginName))
	}
	name := p.Name()
	if !cpex.KnownHook(args.HookType) {
		return errorReply(name, CodeUnknownHook, fmt.Sprintf("unknown hook type %q", args.HookType))
	}
	pctx := args.Context
	if pctx == nil {
		pctx = cpex.NewContext(cpex.GlobalContext{})
	}
	fillContext(pctx)
	reply, err := s.call(ctx, p, args.HookType, args.Payload, pctx)
	switch {
	case err != nil:
		var pe *Error
		if errors.As(err, &pe) {
			m := pe.Model
			if m.PluginName == "" {
				m.PluginName = name
			}
			if m.MCPErrorCode == nil {
				c := MCPInternalError
				m.MCPErrorCode = &c
			}
			return &cpex.InvokeHookReply{PluginName: name, Error: &m}
		}
		code := CodePluginError
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			code = CodeContextCanceled
		}
		s.log.Warn().Err(err).Str("plugin", name).Str("hook", string(args.HookType)).Msg("plugin hook failed")
		return errorReply(name, code, err.Error())
	case reply == nil:
		return Continue(name)
	}
	if reply.PluginName == "" {
		reply.PluginName = name
	}
	if reply.Result != nil && reply.Result.Violation != nil && reply.Result.Violation.PluginName == "" {
		reply.Result.Violation.PluginName = name
	}
	return reply
}

// call runs p.InvokeHook, turning a panic into an error.
func (s *Server) call(ctx context.Context, p Plugin, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (reply *cpex.InvokeHookReply, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error().Str("plugin", p.Name()).Str("hook", string(hook)).
				Str("panic", fmt.Sprint(r)).Bytes("stack", debug.Stack()).Msg("plugin hook panicked")
			reply = nil
			c := MCPInternalError
			err = &Error{Model: cpex.PluginErrorModel{
				Message:      fmt.Sprintf("plugin %s panicked in %s: %v", p.Name(), hook, r),
				PluginName:   p.Name(),
				Code:         CodePluginPanic,
				MCPErrorCode: &c,
			}}
		}
	}()
	return p.InvokeHook(ctx, hook, payload, pctx)
}

// fillContext gives a context from the wire the non-nil maps cpex sends.
func fillContext(c *cpex.PluginContext) {
	if c.State == nil {
		c.State = map[string]any{}
	}
	if c.Metadata == nil {
		c.Metadata = map[string]any{}
	}
	if c.GlobalContext.State == nil {
		c.GlobalContext.State = map[string]any{}
	}
	if c.GlobalContext.Metadata == nil {
		c.GlobalContext.Metadata = map[string]any{}
	}
}

func errorReply(plugin, code, msg string) *cpex.InvokeHookReply {
	c := MCPInternalError
	return &cpex.InvokeHookReply{PluginName: plugin, Error: &cpex.PluginErrorModel{
		Message: msg, PluginName: plugin, Code: code, MCPErrorCode: &c,
	}}
}
