package grpcconn

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

func TestWithTraceMetadata(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("vendor=opaque")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs(
		"traceparent", "00-11111111111111111111111111111111-2222222222222222-01", "tracestate", "stale=1", "x-request-id", "r1"))
	md, _ := metadata.FromOutgoingContext(withTraceMetadata(trace.ContextWithRemoteSpanContext(ctx, sc)))
	want := map[string][]string{
		"traceparent":  {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"tracestate":   {"vendor=opaque"},
		"x-request-id": {"r1"},
	}
	for k, v := range want {
		if got := md.Get(k); len(got) != len(v) || got[0] != v[0] {
			t.Errorf("metadata %s = %q, want %q", k, got, v)
		}
	}
}

// A call without a trace context pays nothing for the propagation.
func TestWithTraceMetadataNoSpanAllocatesNothing(t *testing.T) {
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs("x-request-id", "r1"))
	n := testing.AllocsPerRun(100, func() {
		if withTraceMetadata(ctx) != ctx {
			t.Fatal("ctx changed without a trace context")
		}
	})
	if n != 0 {
		t.Errorf("%v allocations without a trace context, want 0", n)
	}
}
