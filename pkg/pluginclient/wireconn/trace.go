package wireconn

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C Trace Context keys: HTTP header names (lower-cased as gRPC
// metadata keys) and, by SEP-414, the keys of an MCP request's
// params._meta.
const (
	TraceparentKey = "traceparent"
	TracestateKey  = "tracestate"
)

// TraceContext returns the W3C trace context of the span context ctx
// carries (trace.SpanContextFromContext: the current span's, or the remote
// parent's when no span was started here), in the form every transport
// sends it: traceparent, and tracestate ("" when empty). It does not depend
// on a tracer provider: a sidecar that exports nothing still passes on the
// trace context it received. Both are "" when ctx carries no valid span
// context; that case does not allocate.
func TraceContext(ctx context.Context) (traceparent, tracestate string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	var c traceCarrier
	propagation.TraceContext{}.Inject(ctx, &c)
	return c.parent, c.state
}

// traceCarrier receives what propagation.TraceContext injects.
type traceCarrier struct{ parent, state string }

// Get implements propagation.TextMapCarrier.
func (c *traceCarrier) Get(key string) string {
	switch key {
	case TraceparentKey:
		return c.parent
	case TracestateKey:
		return c.state
	}
	return ""
}

// Set implements propagation.TextMapCarrier.
func (c *traceCarrier) Set(key, value string) {
	switch key {
	case TraceparentKey:
		c.parent = value
	case TracestateKey:
		c.state = value
	}
}

// Keys implements propagation.TextMapCarrier.
func (c *traceCarrier) Keys() []string { return []string{TraceparentKey, TracestateKey} }
