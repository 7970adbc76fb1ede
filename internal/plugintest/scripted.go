package plugintest

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// Call is one invoke_hook a [Scripted] plugin received.
type Call struct {
	Hook    cpex.HookType
	Payload json.RawMessage
	Context *cpex.PluginContext // as received, before the script ran
	// Trace is the trace context the call carried, per carrier (_meta,
	// HTTP header, gRPC metadata), as the server received it.
	Trace pluginserver.CallTrace
	// Parent is the span context the hook ran under: the remote parent
	// the server took from Trace.
	Parent trace.SpanContext
}

// TraceIDs returns the trace id of each carrier's traceparent ("" when it
// carried none or an invalid one), and of Parent.
func (c Call) TraceIDs() (meta, header, metadata, parent string) {
	return traceID(c.Trace.Meta.Traceparent), traceID(c.Trace.Header.Traceparent),
		traceID(c.Trace.Metadata.Traceparent), spanTraceID(c.Parent)
}

// traceID returns the trace id of a W3C traceparent, or "" if it is not
// a valid one.
func traceID(traceparent string) string {
	if traceparent == "" {
		return ""
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	return spanTraceID(trace.SpanContextFromContext(ctx))
}

func spanTraceID(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// Scripted is a [pluginserver.Plugin] whose behaviour a test sets (and may
// change at any time) with SetFunc, and which records every call. It is safe
// for concurrent use.
type Scripted struct {
	mu    sync.Mutex
	cfg   pluginserver.Config
	fn    pluginserver.HookFunc
	calls []Call
}

// NewScripted returns a plugin named name declaring hooks (all MCP hooks if
// none), mode sequential, priority 100, that continues every hook until
// SetFunc says otherwise.
func NewScripted(name string, hooks ...cpex.HookType) *Scripted {
	if len(hooks) == 0 {
		hooks = cpex.MCPHooks[:]
	}
	return &Scripted{cfg: pluginserver.Config{Name: name, Hooks: slices.Clone(hooks)}}
}

// SetConfig replaces the config get_plugin_config reports. The name the
// plugin is served under stays the one given to NewScripted.
func (p *Scripted) SetConfig(cfg pluginserver.Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	name := p.cfg.Name
	p.cfg = cfg
	p.cfg.Name = name
}

// SetFunc sets the behaviour of the next calls; nil continues unchanged.
func (p *Scripted) SetFunc(fn pluginserver.HookFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fn = fn
}

// Calls returns the calls received so far, oldest first.
func (p *Scripted) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// CallCount returns the number of calls received so far.
func (p *Scripted) CallCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}

// Reset forgets the recorded calls.
func (p *Scripted) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = nil
}

// Name implements [pluginserver.Plugin.Name].
func (p *Scripted) Name() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.Name
}

// Config implements [pluginserver.Plugin.Config].
func (p *Scripted) Config() map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.Map()
}

// InvokeHook implements [pluginserver.Plugin.InvokeHook]: it records the call
// and runs the current script.
func (p *Scripted) InvokeHook(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	p.mu.Lock()
	p.calls = append(p.calls, Call{Hook: hook, Payload: slices.Clone(payload), Context: cloneContext(pctx),
		Trace: pluginserver.CallTraceFrom(ctx), Parent: trace.SpanContextFromContext(ctx)})
	fn := p.fn
	p.mu.Unlock()
	if fn == nil {
		return nil, nil
	}
	return fn(ctx, hook, payload, pctx)
}

// cloneContext deep-copies c through JSON, so later changes by the script do
// not alter the record.
func cloneContext(c *cpex.PluginContext) *cpex.PluginContext {
	if c == nil {
		return nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return c
	}
	var out cpex.PluginContext
	if err := json.Unmarshal(b, &out); err != nil {
		return c
	}
	return &out
}

// Block is a script that blocks every hook with violation v.
func Block(v cpex.PluginViolation) pluginserver.HookFunc {
	return func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		return pluginserver.Block("", v), nil
	}
}

// Fail is a script that answers every hook with an error reply carrying
// model (plugin_name is filled in by the server).
func Fail(model cpex.PluginErrorModel) pluginserver.HookFunc {
	return func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		return nil, &pluginserver.Error{Model: model}
	}
}

// Replace is a script that continues every hook with modified (marshalled to
// JSON) as the modified payload.
func Replace(modified any) pluginserver.HookFunc {
	return func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		return pluginserver.Modify("", modified)
	}
}

// Reply is a script that answers every hook with reply as is, except that
// the server fills in an empty plugin_name (use it for malformed replies,
// such as one with neither result nor error).
func Reply(reply cpex.InvokeHookReply) pluginserver.HookFunc {
	return func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		r := reply
		return &r, nil
	}
}

// WaitFor is a script that holds every hook until release is closed or the
// hook's context ends, then runs then (nil: continue). Use it for slow or
// stuck plugins.
func WaitFor(release <-chan struct{}, then pluginserver.HookFunc) pluginserver.HookFunc {
	return func(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if then == nil {
			return nil, nil
		}
		return then(ctx, hook, payload, pctx)
	}
}
