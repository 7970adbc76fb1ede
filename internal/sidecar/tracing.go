package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
)

// ServiceName is the service.name of the spans the sidecar exports.
const ServiceName = "mcp-extproc"

// InvokeSpanName is the name of the span exported for each plugin
// invocation.
const InvokeSpanName = "mcp_extproc.invoke_hook"

// Attributes of the invocation span.
const (
	AttrPlugin   = "mcp_extproc.plugin"    // the plugin's name
	AttrHookType = "mcp_extproc.hook_type" // the cpex hook type, e.g. tool_pre_invoke
	AttrOutcome  = "mcp_extproc.outcome"   // an executor.Verdict: allow, modify, block, violation_not_enforced, stop, error, timeout, down or invalid
)

// tracing exports one span per plugin invocation over OTLP/gRPC. It exists
// only when Options.OTLPEndpoint is set.
type tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
}

// newTracing starts the exporter and the batching tracer provider. The
// exporter connects lazily: an unreachable collector does not stop the
// sidecar, spans are dropped instead.
func newTracing(ctx context.Context, endpoint string, insecure bool) (*tracing, error) {
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(endpoint)}
	if insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter %s: %w", endpoint, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", ServiceName)))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("otlp resource: %w", err), exp.Shutdown(ctx))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &tracing{provider: tp, tracer: tp.Tracer("github.com/mcp-extproc/mcp-extproc/internal/sidecar")}, nil
}

// shutdown flushes the spans not yet exported and stops the exporter,
// bounded by ctx.
func (t *tracing) shutdown(ctx context.Context) error {
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracer provider shutdown: %w", err)
	}
	return nil
}

// continueTrace is the processor's WithHeaders, whether tracing is on or
// not: it makes the request's W3C trace context (its traceparent and
// tracestate, which the processor validated and put in h) the remote parent
// in ctx, and attaches h to plugin calls (pluginclient.WithHeaders). The
// plugin client sends the trace context of the span current at each call —
// the invocation span when tracing is on, else the request's own — to every
// plugin (HTTP headers and _meta over MCP, metadata over gRPC), so a trace
// goes on through a sidecar that exports nothing.
func continueTrace(ctx context.Context, h http.Header) context.Context {
	if len(h["Traceparent"]) > 0 { // the processor's canonical key; none: nothing to extract, nothing to pay
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(h))
	}
	return pluginclient.WithHeaders(ctx, h)
}

// tracedPlugins is a pluginSet whose invocations are traced. It satisfies
// executor.Plugins.
type tracedPlugins struct {
	*pluginSet
	t *tracing
}

// Invoke implements executor.Plugins: it runs the invocation in a client
// span, which the plugin client makes the parent the plugin call carries
// (traceparent), so that the plugin's own spans nest under it.
func (p *tracedPlugins) Invoke(ctx context.Context, plugin string, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	ctx, span := p.t.tracer.Start(ctx, InvokeSpanName, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String(AttrPlugin, plugin), attribute.String(AttrHookType, string(hook))))
	defer span.End()
	reply, err := p.pluginSet.Invoke(ctx, plugin, hook, payload, pctx)
	span.SetAttributes(attribute.String(AttrOutcome, p.outcome(plugin, reply, err)))
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case reply != nil && reply.Error != nil:
		span.SetStatus(codes.Error, reply.Error.Message)
	}
	return reply, err
}

// outcome names the invocation in the executor's vocabulary, under the
// plugin's mode as the metrics count it (executor.ModeVerdict): an audit
// plugin's blocking answer is violation_not_enforced on the span too. The
// span ends before the chain's own checks (a modification equal to the
// current payload, or one that does not fit the hook), which it cannot see.
func (p *tracedPlugins) outcome(plugin string, reply *cpex.InvokeHookReply, err error) string {
	v := executor.ReplyVerdict(reply, err, errors.Is(err, pluginclient.ErrPluginDown))
	if c, ok := p.Client(plugin); ok {
		eff := c.Effective()
		v = executor.ModeVerdict(v, eff.EffectiveMode())
	}
	return v.String()
}
