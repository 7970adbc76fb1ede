package bench

import (
	"context"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
)

// BenchmarkBuiltinLayers splits one in-process deny_filter invocation on
// the echo call by layer: the plugin behind its Conn, the plugin client
// (with the deadline the executor gives it), and a whole executor run with
// that one plugin. Table 13's tool-call ratio is mostly the last minus the
// first two.
func BenchmarkBuiltinLayers(b *testing.B) {
	ctx := context.Background()
	cfg := map[string]any{"words": []any{"innovative"}}
	const kind = "plugins.deny_filter.deny.DenyListPlugin"
	pl := config.Plugin{Name: "Deny", Kind: kind, Hooks: []cpex.HookType{cpex.ToolPreInvoke}, Mode: config.ModeSequential, Config: cfg}
	conn, err := builtin.Open("Deny", kind, cfg)
	if err != nil {
		b.Fatal(err)
	}
	c, err := pluginclient.New(pl, config.PluginSettings{}, pluginclient.Options{
		Dialer: func(context.Context) (pluginclient.Conn, error) { return conn, nil }, Slots: 1, HealthCheckInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	c.Start(ctx)
	defer c.Close(ctx)
	pool, err := pluginclient.PoolOf(c)
	if err != nil {
		b.Fatal(err)
	}
	// As the sidecar's plugin set does, the executor is told the plugin
	// cannot block.
	e := executor.New(&nonBlockingPool{pool, conn.NonBlocking()}, executor.Options{})
	defer e.Close(ctx)
	payload, pctx := toolPrePayload(), pluginContext()
	b.Run("conn", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := conn.InvokeHook(ctx, cpex.ToolPreInvoke, "Deny", payload, pctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("client", func(b *testing.B) {
		dctx, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Invoke(dctx, cpex.ToolPreInvoke, payload, pctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("executor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if out := e.Run(ctx, cpex.ToolPreInvoke, payload, nil, executor.Target{Name: "echo"}); out.Err != nil || out.Violation != nil {
				b.Fatalf("%+v", out)
			}
		}
	})
}

// nonBlockingPool is a pool of one in-process plugin that says whether it
// can block, as the sidecar's plugin set says it (executor.NonBlocking).
type nonBlockingPool struct {
	*pluginclient.Pool
	nonBlocking bool
}

func (p *nonBlockingPool) NonBlocking(string) bool { return p.nonBlocking }
