package wireconn_test

import (
	"context"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// BenchmarkInvoke measures one tool_pre_invoke round trip per transport
// against the Go plugin server on loopback: one caller at a time (serial)
// and 8 callers per CPU (parallel).
func BenchmarkInvoke(b *testing.B) {
	for _, tr := range transports(b) {
		b.Run(tr.name, func(b *testing.B) {
			addr, stop := tr.listen(b, testPlugins(), "")
			defer stop()
			c := tr.dial(b, addr, false)
			defer c.Close()
			ctx := context.Background()
			b.Run("serial", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.InvokeHook(ctx, cpex.ToolPreInvoke, "redact", payload, pctx()); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(8)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := c.InvokeHook(ctx, cpex.ToolPreInvoke, "redact", payload, pctx()); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}
