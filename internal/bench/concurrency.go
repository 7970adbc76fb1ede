package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// concurrency: many concurrent streams, passthrough and one plugin.
func (r *runner) concurrency(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	guard, err := StartPlugin(DelayPlugin("Guard", 0, cpex.ToolPreInvoke))
	if err != nil {
		return err
	}
	cl.add(guard)
	pol, err := startPolicySetup(ctx, &cl)
	if err != nil {
		return err
	}
	mini, err := serveMinimal(&cl, filterv3.ProcessingMode_NONE)
	if err != nil {
		return err
	}
	passSC, err := StartSidecar(ctx, "sidecar", SidecarConfig(0, PluginSpec{Name: "Guard", URL: guard.URL, Hooks: []cpex.HookType{cpex.ToolPreInvoke}, Tools: []string{"other"}}))
	if err != nil {
		return err
	}
	cl.add(passSC)
	p, ok, err := preparedToolsCall()
	if err != nil {
		return err
	}
	d := &Driver{}
	polSC, call := pol.sc, pol.call
	workloads := []struct {
		name string
		a, b Op
	}{
		{"passthrough (tools/call, cond-miss)", exchangeOp(d, passSC, p, ok), exchangeOp(d, mini, p, ok)},
		{"one plugin (tools/call, policy)", exchangeOp(d, polSC, p, ok), baselineOp(d, mini, p, ok, false, false, call)},
	}
	t := Table{
		Title: "5. Concurrency: N streams at once (each a worker looping exchanges), sidecar vs baseline",
		Header: []string{"workload", "streams", "target", "throughput", "p50", "p99", "goroutines", "RSS",
			"heap", "allocs/op", "ratio thrpt", "ratio p99"},
		Notes: []string{
			"one process holds the driver, both gRPC ends, the servers and the plugin server; goroutines, RSS (VmRSS) and heap are the process maxima during the run, after a GC and FreeOSMemory before it; the differences between the rows are the servers'.",
			"baseline: minimal (passthrough), minimal + direct invoke_hook (one plugin).",
			"ratio thrpt = sidecar / baseline (lower is worse); ratio p99 = sidecar / baseline (higher is worse).",
		},
	}
	for _, w := range workloads {
		for _, n := range r.levels {
			cmp, err := CompareLoad(ctx, r.load, n, w.a, w.b)
			if err != nil {
				return fmt.Errorf("%s at %d streams: %w", w.name, n, err)
			}
			for i, name := range []string{"sidecar", "baseline"} {
				s := cmp.Median(i)
				rt, rp := "", ""
				if i == 0 {
					rt, rp = ratio(cmp.Ratio(0, 1, MetricThroughput)), ratio(cmp.Ratio(0, 1, MetricP99))
				}
				t.Rows = append(t.Rows, []string{w.name, strconv.Itoa(n), name, rate(s.Throughput), dur(s.P50), dur(s.P99),
					strconv.Itoa(s.Goroutines), mib(s.RSS), mib(s.HeapBytes), count(s.AllocsPerOp), rt, rp})
			}
			r.logf("concurrency %s n=%d: sidecar %s, baseline %s", w.name, n,
				rate(cmp.Median(0).Throughput), rate(cmp.Median(1).Throughput))
		}
	}
	r.rep.Tables = append(r.rep.Tables, t)
	return nil
}
