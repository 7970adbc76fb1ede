package wireconn_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
)

// remote returns ctx carrying a remote (not recording) span context, as a
// sidecar without a tracer provider has it from the request's traceparent.
func remote(t testing.TB, ctx context.Context, traceID, spanID, state string) context.Context {
	t.Helper()
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		t.Fatal(err)
	}
	sid, err := trace.SpanIDFromHex(spanID)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := trace.ParseTraceState(state)
	if err != nil {
		t.Fatal(err)
	}
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
	}))
}

func TestTraceContext(t *testing.T) {
	tests := []struct {
		name               string
		ctx                context.Context
		wantParent, wantTS string
	}{
		{"none", context.Background(), "", ""},
		{"remote parent, nothing recording",
			remote(t, context.Background(), "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "vendor=opaque"),
			"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "vendor=opaque"},
		{"no tracestate",
			remote(t, context.Background(), "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", ""),
			"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", ""},
		{"invalid span context", trace.ContextWithSpanContext(context.Background(), trace.SpanContext{}), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent, state := wireconn.TraceContext(tt.ctx)
			if parent != tt.wantParent || state != tt.wantTS {
				t.Errorf("TraceContext = %q, %q; want %q, %q", parent, state, tt.wantParent, tt.wantTS)
			}
		})
	}
}

// A call without a trace pays nothing for the propagation.
func TestTraceContextNoSpanAllocatesNothing(t *testing.T) {
	ctx := context.WithValue(context.Background(), struct{}{}, "x")
	if n := testing.AllocsPerRun(100, func() { _, _ = wireconn.TraceContext(ctx) }); n != 0 {
		t.Errorf("TraceContext without a span context: %v allocations, want 0", n)
	}
}
