package bench

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
	"github.com/mcp-extproc/mcp-extproc/pkg/metrics"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
	"github.com/mcp-extproc/mcp-extproc/pkg/rules"
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
	e := executor.New(&namedNonBlockingPool{pool, map[string]executor.LocalPlugin{"Deny": conn}}, executor.Options{})
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

// builtinProcessor is the sidecar's request path for a config of built-in
// plugins only, wired as internal/sidecar wires it (inProcess, the plugin
// set's NonBlocking), without gRPC: table 13's tool call, in memory.
func builtinProcessor(b *testing.B, pluginsYAML string) *processor.Server {
	b.Helper()
	cfg, err := config.Parse([]byte("plugins:\n"+pluginsYAML+"extproc:\n  mcp_paths: [\"/mcp\"]\n"), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var clients []*pluginclient.Client
	nb := map[string]executor.LocalPlugin{}
	for _, p := range cfg.Plugins {
		conn, err := builtin.Open(p.Name, p.Kind, p.Config)
		if err != nil {
			b.Fatal(err)
		}
		if conn.NonBlocking() {
			nb[p.Name] = conn
		}
		c, err := pluginclient.New(p, cfg.PluginSettings, pluginclient.Options{
			Dialer: func(context.Context) (pluginclient.Conn, error) { return conn, nil }, Slots: 1, HealthCheckInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		c.Start(ctx)
		b.Cleanup(func() { _ = c.Close(context.Background()) })
		clients = append(clients, c)
	}
	pool, err := pluginclient.PoolOf(clients...)
	if err != nil {
		b.Fatal(err)
	}
	e := executor.New(&namedNonBlockingPool{pool, nb}, executor.Options{Settings: cfg.PluginSettings, HookTimeout: cfg.HookTimeout(),
		Observer: metrics.New(prometheus.NewRegistry())})
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	ident, err := identity.New(cfg.Extproc.Identity)
	if err != nil {
		b.Fatal(err)
	}
	ruleSet, _ := rules.Compile(cfg.Extproc.Rules, rules.Options{})
	// As the sidecar without tracing: every plugin is a built-in.
	snap := &processor.Snapshot{Settings: &cfg.Extproc, Hooks: e, Identity: ident, Rules: ruleSet, InProcessOnly: true}
	return processor.New(processor.Options{Logger: Logger(), Snapshot: func() *processor.Snapshot { return snap }})
}

type namedNonBlockingPool struct {
	*pluginclient.Pool
	nb map[string]executor.LocalPlugin
}

func (p *namedNonBlockingPool) NonBlocking(plugin string) executor.LocalPlugin { return p.nb[plugin] }

// BenchmarkBuiltinCallInMemory is table 13's tool call without gRPC: the
// echo tools/call through the processor with the three built-ins, and
// with the one built-in whose condition no call matches (no plugin run).
func BenchmarkBuiltinCallInMemory(b *testing.B) {
	benchBuiltinCall(b, func(b *testing.B, name, yaml string) *Endpoint {
		return &Endpoint{Name: name, Client: Pipe(builtinProcessor(b, yaml))}
	})
}

// BenchmarkBuiltinCallGRPC is table 13's checked row without the harness:
// the same calls through the sidecar (internal/sidecar.Run, over gRPC on
// loopback).
//
//	go test -run '^$' -bench BuiltinCallGRPC -benchmem ./internal/bench
func BenchmarkBuiltinCallGRPC(b *testing.B) {
	benchBuiltinCall(b, builtinSidecar)
}

// builtinSidecar starts the sidecar of table 13 with the plugins entries
// pluginsYAML, closed when b ends.
func builtinSidecar(b *testing.B, name, pluginsYAML string) *Endpoint {
	sc, err := StartSidecar(context.Background(), name, builtinSidecarYAML(pluginsYAML))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sc.Close() })
	return sc
}

// benchBuiltinCall times the echo tools/call on the endpoint serve makes
// for the three built-ins ("three") and for the idle one ("idle").
func benchBuiltinCall(b *testing.B, serve func(b *testing.B, name, pluginsYAML string) *Endpoint) {
	ctx := context.Background()
	p, ok, err := preparedToolsCall()
	if err != nil {
		b.Fatal(err)
	}
	d := &Driver{}
	for _, bc := range []struct{ name, yaml string }{{"three", builtinPluginsYAML}, {"idle", idlePluginYAML}} {
		b.Run(bc.name, func(b *testing.B) {
			op := exchangeOp(d, serve(b, bc.name, bc.yaml), p, ok)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := op(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBuiltinCallPaired times table 13's checked pair, the three
// built-ins and the idle one, one exchange each in turn, and reports the
// ratio of their p50s: drift of a shared machine then falls on both alike,
// where the harness's rounds (one target after the other) see it as a
// difference.
//
//	go test -run '^$' -bench BuiltinCallPaired ./internal/bench
func BenchmarkBuiltinCallPaired(b *testing.B) {
	ctx := context.Background()
	p, ok, err := preparedToolsCall()
	if err != nil {
		b.Fatal(err)
	}
	d := &Driver{}
	var ops [2]Op
	for i, yaml := range []string{builtinPluginsYAML, idlePluginYAML} {
		ops[i] = exchangeOp(d, builtinSidecar(b, "paired", yaml), p, ok)
	}
	var took [2][]time.Duration
	for b.Loop() {
		for i, op := range ops {
			t, err := op(ctx)
			if err != nil {
				b.Fatal(err)
			}
			took[i] = append(took[i], t.Total)
		}
	}
	three, idle := percentile(took[0], 0.5), percentile(took[1], 0.5)
	b.ReportMetric(float64(three.Nanoseconds()), "three-p50-ns")
	b.ReportMetric(float64(idle.Nanoseconds()), "idle-p50-ns")
	b.ReportMetric(float64(three)/float64(idle), "ratio")
}
