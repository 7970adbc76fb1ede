package pluginclient

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// BenchmarkReplicas measures hook calls per second through a per-connection
// balancer to 1, 2 and 4 stateful replicas (servers on loopback, in this
// process), 32 callers, with the default pool size and with 16 sessions.
// On a small machine the replicas share the client's cores: the numbers
// show the client's cost and its spreading, not the replicas' capacity.
func BenchmarkReplicas(b *testing.B) {
	for _, replicas := range []int{1, 2, 4} {
		for _, slots := range []int{DefaultSlots, 16} {
			b.Run(fmt.Sprintf("replicas=%d/sessions=%d", replicas, slots), func(b *testing.B) {
				benchmarkReplicas(b, replicas, slots)
			})
		}
	}
}

func benchmarkReplicas(b *testing.B, replicas, slots int) {
	addrs := make([]string, replicas)
	for i := range addrs {
		srv := plugintest.StartPlugins(b, plugintest.GoSDK, &pluginserver.Options{}, plugintest.NewScripted("guard"))
		addrs[i] = srv.Addr()
	}
	lb := plugintest.StartBalancer(b, addrs...)
	pool, err := NewPool([]config.Plugin{external("guard", lb.URL())}, config.PluginSettings{},
		Options{HealthCheckInterval: -1, Slots: slots})
	if err != nil {
		b.Fatal(err)
	}
	pool.Start(context.Background())
	defer pool.Close(context.Background())
	ctx := context.Background()
	pctx := testContext("bench")
	if _, err := pool.Invoke(ctx, "guard", cpex.ToolPreInvoke, testPayload, pctx); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(16) // 32 callers on 2 cores
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := pool.Invoke(ctx, "guard", cpex.ToolPreInvoke, testPayload, pctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}
