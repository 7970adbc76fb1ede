package pluginserver

import (
	"context"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
)

func TestWithCallTrace(t *testing.T) {
	const (
		a = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		b = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		c = "00-5b8aa5a2d2c872e8321cf37308d69df2-051581bf3cb55c13-01"
	)
	own := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1},
	}))
	tests := []struct {
		name       string
		ctx        context.Context
		ct         CallTrace
		wantParent string // the span context the hook runs under, as a traceparent; "" none
		wantState  string
	}{
		{"nothing carried", context.Background(), CallTrace{}, "", ""},
		{"_meta wins", context.Background(), CallTrace{Meta: TraceContext{a, "m=1"}, Header: TraceContext{b, "h=1"}, Metadata: TraceContext{c, ""}}, a, "m=1"},
		{"metadata before header", context.Background(), CallTrace{Header: TraceContext{b, ""}, Metadata: TraceContext{c, "g=1"}}, c, "g=1"},
		{"header alone", context.Background(), CallTrace{Header: TraceContext{b, "h=1"}}, b, "h=1"},
		{"an invalid _meta falls back", context.Background(), CallTrace{Meta: TraceContext{"garbage", ""}, Header: TraceContext{b, ""}}, b, ""},
		{"a span already current is kept", own, CallTrace{Meta: TraceContext{a, ""}}, "00-01000000000000000000000000000000-0100000000000000-00", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := withCallTrace(tt.ctx, tt.ct)
			if got := CallTraceFrom(ctx); got != tt.ct {
				t.Errorf("CallTraceFrom = %+v, want %+v", got, tt.ct)
			}
			sc := trace.SpanContextFromContext(ctx)
			var parent string
			if sc.IsValid() {
				parent = "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
			}
			if parent != tt.wantParent || sc.TraceState().String() != tt.wantState {
				t.Errorf("hook runs under %q %q, want %q %q", parent, sc.TraceState(), tt.wantParent, tt.wantState)
			}
		})
	}
}

// A call that carries no trace context costs the server nothing.
func TestNoCallTraceAllocatesNothing(t *testing.T) {
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "invoke_hook"},
		Extra: &mcp.RequestExtra{Header: http.Header{"Content-Type": {"application/json"}}}}
	ctx := context.Background()
	n := testing.AllocsPerRun(100, func() {
		if withCallTrace(ctx, mcpCallTrace(req)) != ctx {
			t.Fatal("ctx changed without a trace context")
		}
	})
	if n != 0 {
		t.Errorf("%v allocations without a trace context, want 0", n)
	}
}
