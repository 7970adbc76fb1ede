package pluginclient

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

func benchmarkInvoke(b *testing.B, jsonResponse bool, ctx context.Context) {
	plug := plugintest.NewScripted("guard")
	srv := plugintest.StartPlugins(b, plugintest.GoSDK, &pluginserver.Options{JSONResponse: jsonResponse}, plug)
	pool, err := NewPool([]config.Plugin{external("guard", srv.URL())}, config.PluginSettings{}, Options{HealthCheckInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	pool.Start(context.Background())
	defer pool.Close(context.Background())
	pctx := testContext("bench")
	b.SetParallelism(25)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := pool.Invoke(ctx, "guard", cpex.ToolPreInvoke, testPayload, pctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkInvokeSSE(b *testing.B)  { benchmarkInvoke(b, false, context.Background()) }
func BenchmarkInvokeJSON(b *testing.B) { benchmarkInvoke(b, true, context.Background()) }

// BenchmarkInvokeJSONTraced is BenchmarkInvokeJSON under a remote parent
// span context: the cost of carrying the trace context (headers, _meta).
func BenchmarkInvokeJSONTraced(b *testing.B) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	benchmarkInvoke(b, true, trace.ContextWithRemoteSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})))
}

// BenchmarkInvokeVsDirect compares one call at a time through a Pool with
// the same invoke_hook made by a bare go-sdk client session (the baseline:
// what any MCP client pays) on the same server: the difference is the
// plugin client's own cost (slots, session bookkeeping, reply parsing).
//
//	go test -run '^$' -bench InvokeVsDirect -benchmem -count 6 ./pkg/pluginclient
func BenchmarkInvokeVsDirect(b *testing.B) {
	plug := plugintest.NewScripted("guard")
	srv := plugintest.StartPlugins(b, plugintest.GoSDK, nil, plug)
	pool, err := NewPool([]config.Plugin{external("guard", srv.URL())}, config.PluginSettings{}, Options{HealthCheckInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	pool.Start(context.Background())
	defer pool.Close(context.Background())
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL(), MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	pctx := testContext("bench")
	b.Run("pool", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pool.Invoke(ctx, "guard", cpex.ToolPreInvoke, testPayload, pctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: cpex.ToolInvokeHook,
				Arguments: cpex.InvokeHookArgs{HookType: cpex.ToolPreInvoke, PluginName: "guard", Payload: testPayload, Context: pctx}})
			if err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
	})
}
