package pluginserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

// The W3C Trace Context keys: HTTP headers, gRPC metadata keys, and the
// keys SEP-414 reserves in an MCP request's params._meta.
const (
	traceparentKey = "traceparent"
	tracestateKey  = "tracestate"
)

// TraceContext is a W3C trace context as one carrier brought it, unchecked
// ("" when absent).
type TraceContext struct {
	Traceparent, Tracestate string
}

// CallTrace is the trace context one invoke_hook call carried, per carrier.
// The Unix-socket transport has no carrier: its frames hold the request
// message alone.
type CallTrace struct {
	// Meta is the request's params._meta (SEP-414): every MCP transport,
	// Streamable HTTP, legacy SSE and STDIO.
	Meta TraceContext
	// Header is the HTTP request's headers: MCP Streamable HTTP (the
	// go-sdk's legacy SSE handler does not hand them to tools).
	Header TraceContext
	// Metadata is the gRPC call's metadata.
	Metadata TraceContext
}

// CallTraceFrom returns what the invoke_hook call whose hook ctx is
// carried: the context a [Plugin]'s InvokeHook receives.
func CallTraceFrom(ctx context.Context) CallTrace {
	ct, _ := ctx.Value(callTraceKey{}).(CallTrace)
	return ct
}

type callTraceKey struct{}

// withCallTrace returns ctx carrying ct (CallTraceFrom) and, unless ctx
// already has a valid span context (a server span started by middleware),
// the first valid trace context of ct — _meta, then gRPC metadata, then
// the HTTP header — as the remote parent: a plugin's own spans nest under
// the caller's span, whether or not this process has a tracer provider.
func withCallTrace(ctx context.Context, ct CallTrace) context.Context {
	if ct == (CallTrace{}) {
		return ctx
	}
	ctx = context.WithValue(ctx, callTraceKey{}, ct)
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	for _, tc := range [...]TraceContext{ct.Meta, ct.Metadata, ct.Header} {
		if tc.Traceparent == "" {
			continue
		}
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), traceCarrier(tc)))
		if sc.IsValid() {
			return trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	return ctx
}

// traceCarrier reads a TraceContext as a propagation.TextMapCarrier.
type traceCarrier TraceContext

// Get implements propagation.TextMapCarrier.
func (c traceCarrier) Get(key string) string {
	switch key {
	case traceparentKey:
		return c.Traceparent
	case tracestateKey:
		return c.Tracestate
	}
	return ""
}

// Set implements propagation.TextMapCarrier; the carrier is only read.
func (traceCarrier) Set(string, string) {}

// Keys implements propagation.TextMapCarrier.
func (traceCarrier) Keys() []string { return []string{traceparentKey, tracestateKey} }

// mcpCallTrace reads the trace context of an MCP tools/call: its _meta and,
// over Streamable HTTP, its HTTP headers.
func mcpCallTrace(req *mcp.CallToolRequest) CallTrace {
	var ct CallTrace
	if req == nil {
		return ct
	}
	if req.Params != nil {
		m := req.Params.Meta
		ct.Meta.Traceparent, _ = m[traceparentKey].(string)
		ct.Meta.Tracestate, _ = m[tracestateKey].(string)
	}
	if req.Extra != nil {
		h := req.Extra.Header
		ct.Header = TraceContext{Traceparent: first(h[traceparentHeader]), Tracestate: first(h[tracestateHeader])}
	}
	return ct
}

// The canonical header names: looked up directly, a call without them costs
// no canonicalisation.
const (
	traceparentHeader = "Traceparent"
	tracestateHeader  = "Tracestate"
)

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// grpcCallTrace reads the trace context of a gRPC call's metadata.
func grpcCallTrace(ctx context.Context) CallTrace {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return CallTrace{}
	}
	return CallTrace{Metadata: TraceContext{Traceparent: first(md.Get(traceparentKey)), Tracestate: first(md.Get(tracestateKey))}}
}
