package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/grpc"

	"github.com/mcp-extproc/mcp-extproc/internal/sidecar"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/grpcconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/unixconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver/policy"
)

// transportWorkers is the number of concurrent exchanges of the throughput
// half of the transports scenario.
const transportWorkers = 16

// hookInvoker is a direct client of one plugin, without the sidecar.
type hookInvoker interface {
	InvokeHook(ctx context.Context, hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error)
}

// directMCP adapts Direct (the go-sdk client) to hookInvoker.
type directMCP struct{ *Direct }

func (d directMCP) InvokeHook(ctx context.Context, hook cpex.HookType, _ string, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	return d.Invoke(ctx, hook, payload, pctx)
}

// transportPlugin is one plugin server on loopback over one cpex transport,
// with the sidecar's config section that reaches it and a direct client.
type transportPlugin struct {
	name    string // as in reports
	section string // the plugin's transport section, YAML flow style
	direct  hookInvoker
	count   func() int64 // the plugin's calls so far, over every client
	closers closers
}

func (t *transportPlugin) Close() error { return t.closers.close() }

// benchTransports lists the transports measured, in report order.
var benchTransports = []string{"MCP/HTTP", "gRPC TCP", "gRPC UDS", "Unix socket", "STDIO"}

// transportDeny is what the transports scenario's policy plugin denies.
const transportDeny = `(?i)drop\s+table`

// transportPolicy is the transports scenario's plugin: a policy named name
// that denies transportDeny on tool_pre_invoke.
func transportPolicy(name string) (pluginserver.Plugin, error) {
	return policy.New(policy.Config{Name: name, Deny: []string{transportDeny}, Hooks: []cpex.HookType{cpex.ToolPreInvoke}}, nil)
}

// startTransportPlugin serves p over the named transport (sockets in dir).
// Over STDIO the plugin runs in child processes, which cannot be handed p:
// they serve transportPolicy under p's name (see startStdioPlugin).
func startTransportPlugin(ctx context.Context, transport string, p pluginserver.Plugin, dir string) (tp *transportPlugin, err error) {
	calls := new(atomic.Int64)
	tp = &transportPlugin{name: transport, count: calls.Load}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("%s: %w", transport, err), tp.Close())
		}
	}()
	counted := &counting{Plugin: p, calls: calls}
	switch transport {
	case "MCP/HTTP":
		ps, err := StartPlugin(p) // counts the calls itself
		if err != nil {
			return tp, err
		}
		tp.closers.add(ps)
		tp.count = ps.calls.Load
		d, err := DialDirect(ctx, ps.URL, p.Name())
		if err != nil {
			return tp, err
		}
		tp.closers.add(d)
		tp.direct, tp.section = directMCP{d}, fmt.Sprintf("mcp: {proto: STREAMABLEHTTP, url: %q}", ps.URL)
	case "gRPC TCP", "gRPC UDS":
		var lis net.Listener
		target, uds := "", ""
		if transport == "gRPC UDS" {
			uds = filepath.Join(dir, "grpc.sock")
			lis, err = pluginserver.ListenUnix(uds)
			tp.section = fmt.Sprintf("grpc: {uds: %q}", uds)
		} else {
			lis, err = net.Listen("tcp", "127.0.0.1:0")
			if err == nil {
				target = lis.Addr().String()
			}
			tp.section = fmt.Sprintf("grpc: {target: %q}", target)
		}
		if err != nil {
			return tp, err
		}
		tp.closers.add(serveGRPC(pluginserver.New(counted), lis))
		c, err := grpcconn.New(grpcconn.Target(target, uds), grpcconn.Options{})
		if err != nil {
			return tp, err
		}
		tp.closers.add(c)
		tp.direct = c
	case "Unix socket":
		path := filepath.Join(dir, "plugin.sock")
		lis, err := pluginserver.ListenUnix(path)
		if err != nil {
			return tp, err
		}
		tp.closers.add(serveSocket(pluginserver.New(counted), lis))
		c := unixconn.New(path, unixconn.Options{})
		tp.closers.add(c)
		tp.direct, tp.section = c, fmt.Sprintf("unix_socket: {path: %q}", path)
	case "STDIO":
		return tp, startStdioPlugin(ctx, tp, p.Name(), dir)
	default:
		return tp, fmt.Errorf("unknown transport")
	}
	return tp, nil
}

// closeFunc is an io.Closer.
type closeFunc func() error

func (f closeFunc) Close() error { return f() }

// serveGRPC serves ps's cpex gRPC services on lis until Close.
func serveGRPC(ps *pluginserver.Server, lis net.Listener) closeFunc {
	g := grpc.NewServer()
	ps.RegisterGRPC(g)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(lis) }()
	return func() error { g.Stop(); <-done; return ps.Close() }
}

// serveSocket serves ps's Unix-socket transport on lis until Close.
func serveSocket(ps *pluginserver.Server, lis net.Listener) closeFunc {
	u := ps.NewSocketServer(0)
	done := make(chan struct{})
	go func() { defer close(done); _ = u.Serve(lis) }()
	return func() error { err := u.Close(); <-done; return errors.Join(err, ps.Close()) }
}

// transportConfig is SidecarConfig's config for one plugin on
// tool_pre_invoke reached through section (a transport section).
func transportConfig(name, section string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "plugins:\n  - name: %s\n    kind: external\n    mode: sequential\n    on_error: fail\n", name)
	fmt.Fprintf(&b, "    hooks: [%s]\n    %s\n", cpex.ToolPreInvoke, section)
	b.WriteString("plugin_settings:\n  plugin_timeout: 5\n  plugin_health_check_interval: 60\n")
	b.WriteString("extproc:\n  mcp_paths: [\"/mcp\"]\n  hook_timeout: 6\n")
	return b.String()
}

// directOp runs one exchange against the minimal server, then the hook
// through inv: the same work as the sidecar's, without the sidecar.
func directOp(d *Driver, mini *Endpoint, p *Prepared, ok check, inv hookInvoker, plugin string) Op {
	ex := exchangeOp(d, mini, p, ok)
	payload, pctx := toolPrePayload(), pluginContext()
	return func(ctx context.Context) (Timing, error) {
		t, err := ex(ctx)
		if err != nil {
			return t, err
		}
		start := time.Now()
		reply, err := inv.InvokeHook(ctx, cpex.ToolPreInvoke, plugin, payload, pctx)
		if err != nil {
			return t, err
		}
		if reply.Result == nil || !reply.Result.Continue() {
			return t, fmt.Errorf("plugin %s did not continue", plugin)
		}
		t.Plugins = time.Since(start)
		t.Total += t.Plugins
		t.TTFB += t.Plugins
		return t, nil
	}
}

// transportsScenario: tools/call with one enforcing plugin reached over
// each cpex transport, through the sidecar vs Minimal + the same hook
// called directly over the same transport; all targets side by side.
func (r *runner) transportsScenario(ctx context.Context) error {
	return r.transports(ctx, benchTransports)
}

// transports runs the transports scenario over the named transports.
func (r *runner) transports(ctx context.Context, names []string) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	dir, err := os.MkdirTemp("", "mcp-extproc-bench-")
	if err != nil {
		return err
	}
	cl.add(closeFunc(func() error { return os.RemoveAll(dir) }))
	mini, err := Serve("minimal", NewMinimal(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_NONE))
	if err != nil {
		return err
	}
	cl.add(mini)
	p, ok, err := preparedToolsCall()
	if err != nil {
		return err
	}
	d := &Driver{}
	var ops []Op
	for _, name := range names {
		pol, err := transportPolicy("Policy")
		if err != nil {
			return err
		}
		tp, err := startTransportPlugin(ctx, name, pol, dir)
		if err != nil {
			return err
		}
		cl.add(tp)
		sc, err := StartSidecar(ctx, "sidecar "+name, transportConfig("Policy", tp.section))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		cl.add(sc)
		noWorkers, err := StartSidecar(ctx, "sidecar "+name+" without stream workers", transportConfig("Policy", tp.section),
			func(o *sidecar.Options) { o.StreamWorkers = -1 })
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		cl.add(noWorkers)
		for _, ep := range []*Endpoint{sc, noWorkers} {
			if err := callsOnce(ctx, d, ep, p, ok, tp.count); err != nil {
				return err
			}
		}
		ops = append(ops, exchangeOp(d, sc, p, ok), exchangeOp(d, noWorkers, p, ok), directOp(d, mini, p, ok, tp.direct, "Policy"))
	}
	seq, err := Compare(ctx, r.seq, ops...)
	if err != nil {
		return err
	}
	load, err := CompareLoad(ctx, r.load, transportWorkers, ops...)
	if err != nil {
		return err
	}
	r.rep.Tables = append(r.rep.Tables, r.transportsTable(names, seq, load))
	return nil
}

// callsOnce checks that one exchange through ep calls the plugin whose
// calls are counted in calls exactly once.
func callsOnce(ctx context.Context, d *Driver, ep *Endpoint, p *Prepared, ok check, calls func() int64) error {
	before := calls()
	if _, err := exchangeOp(d, ep, p, ok)(ctx); err != nil {
		return err
	}
	if n := calls() - before; n != 1 {
		return fmt.Errorf("%s: the sidecar called the plugin %d times for one tools/call, want 1", ep.Name, n)
	}
	return nil
}

// transportsTable reports the transports scenario and records its checks.
func (r *runner) transportsTable(names []string, seq, load *Comparison) Table {
	t := Table{
		Title: "7. Plugin transports: tools/call echo, one policy plugin on tool_pre_invoke, per cpex transport",
		Header: []string{"transport", "sidecar p50", "p99", "direct p50", "p99", "of which hook p50",
			"ratio p50", "ratio p99", fmt.Sprintf("calls/s sc (%d conc.)", transportWorkers), "direct", "ratio",
			"no workers p50", "ratio p50", "calls/s", "ratio"},
		Notes: []string{
			"sidecar: internal/sidecar.Run with the plugin reached over the transport of the row; direct: the exchange with minimal, then the same invoke_hook over the same transport (go-sdk client for MCP, pkg/pluginclient/grpcconn, unixconn and stdioconn for the others), one after the other.",
			"STDIO: each sidecar starts its own plugin server child (this binary, mcp: {proto: STDIO, cmd: [...]}); the direct client starts another with pkg/pluginclient/stdioconn; every call crosses two pipes and a process boundary.",
			"no workers: the same sidecar with StreamWorkers -1 (grpc-go's default, a new goroutine per ext_proc stream) instead of the default stream workers; its ratios are to the same direct call.",
			"p50/p99 sequential (one exchange at a time); calls/s with concurrent exchanges; every target of every row runs side by side in the same rounds.",
		},
	}
	for i, name := range names {
		sc, nw, dc := 3*i, 3*i+1, 3*i+2
		a, b, c := seq.Median(sc), seq.Median(dc), seq.Median(nw)
		la, lb, lc := load.Median(sc), load.Median(dc), load.Median(nw)
		rp50, rp99 := seq.Ratio(sc, dc, MetricP50), seq.Ratio(sc, dc, MetricP99)
		np50 := seq.Ratio(nw, dc, MetricP50)
		t.Rows = append(t.Rows, []string{name, dur(a.P50), dur(a.P99), dur(b.P50), dur(b.P99), dur(b.Plugins50),
			ratio(rp50), ratio(rp99), rate(la.Throughput), rate(lb.Throughput), ratio(load.Ratio(sc, dc, MetricThroughput)),
			dur(c.P50), ratio(np50), rate(lc.Throughput), ratio(load.Ratio(nw, dc, MetricThroughput))})
		r.rep.Checks = append(r.rep.Checks, Check{Name: "transport " + name + " p50", Ratio: rp50, Target: Target})
		r.logf("transport %s: sidecar p50 %s (no workers %s), direct p50 %s, ratio %.3f (no workers %.3f); %s (no workers %s) vs %s calls/s",
			name, dur(a.P50), dur(c.P50), dur(b.P50), rp50, np50, rate(la.Throughput), rate(lc.Throughput), rate(lb.Throughput))
	}
	return t
}
