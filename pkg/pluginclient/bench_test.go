package pluginclient

import (
	"context"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

func benchmarkInvoke(b *testing.B, jsonResponse bool) {
	plug := plugintest.NewScripted("guard")
	srv := plugintest.StartPlugins(b, plugintest.GoSDK, &pluginserver.Options{JSONResponse: jsonResponse}, plug)
	pool, err := NewPool([]config.Plugin{external("guard", srv.URL())}, config.PluginSettings{}, Options{HealthCheckInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	pool.Start(context.Background())
	defer pool.Close(context.Background())
	ctx := context.Background()
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

func BenchmarkInvokeSSE(b *testing.B)  { benchmarkInvoke(b, false) }
func BenchmarkInvokeJSON(b *testing.B) { benchmarkInvoke(b, true) }
