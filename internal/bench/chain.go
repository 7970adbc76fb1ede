package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// chainScenario: 1, 3 and 5 sequential plugins, with and without an
// artificial delay in each.
func (r *runner) chainScenario(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	mini, err := serveMinimal(&cl, filterv3.ProcessingMode_NONE)
	if err != nil {
		return err
	}
	p, ok, err := preparedToolsCall()
	if err != nil {
		return err
	}
	d := &Driver{}
	const maxPlugins = 5
	t := Table{
		Title: "3. Plugin chain: tools/call echo through N sequential plugins (tool_pre_invoke), each waiting a fixed delay",
		Header: []string{"plugins", "delay", "sidecar p50", "p99", "baseline p50", "Σ plugin p50",
			"sidecar − Σ plugin", "overhead vs baseline", "per plugin", "ratio p50", "ratio p99", "sidecar Δ vs delay 0"},
		Notes: []string{
			"baseline: the exchange with minimal, then the N invoke_hook calls made directly, one after the other.",
			"Σ plugin: the time of those direct calls (p50); sidecar − Σ plugin is everything that is not the plugins (ext_proc round trips included).",
			"overhead vs baseline = sidecar − baseline; per plugin = that / N. Σ plugin and the sidecar grow with N × delay; the overhead should not.",
		},
	}
	zero := map[int]time.Duration{} // sidecar p50 with delay 0, by N
	for _, delay := range r.delays {
		var plugins []PluginSpec
		var directs []*Direct
		for i := range maxPlugins {
			name := "Chain" + strconv.Itoa(i+1)
			ps, err := StartPlugin(DelayPlugin(name, delay, cpex.ToolPreInvoke))
			if err != nil {
				return err
			}
			cl.add(ps)
			dir, err := DialDirect(ctx, ps.URL, name)
			if err != nil {
				return err
			}
			cl.add(dir)
			plugins = append(plugins, PluginSpec{Name: name, URL: ps.URL, Hooks: []cpex.HookType{cpex.ToolPreInvoke}, Priority: 10 + i})
			directs = append(directs, dir)
		}
		for _, n := range []int{1, 3, 5} {
			sc, err := StartSidecar(ctx, "sidecar", SidecarConfig(0, plugins[:n]...))
			if err != nil {
				return err
			}
			calls := make([]hookCall, n)
			for i := range n {
				calls[i] = hookCall{d: directs[i], hook: cpex.ToolPreInvoke, payload: toolPrePayload(), pctx: pluginContext()}
			}
			cmp, err := Compare(ctx, r.chain, exchangeOp(d, sc, p, ok), baselineOp(d, mini, p, ok, false, false, calls...))
			if cerr := sc.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			a, b := cmp.Median(0), cmp.Median(1)
			over := a.P50 - b.P50
			delta := "-"
			if delay == 0 {
				zero[n] = a.P50
			} else if z, ok := zero[n]; ok {
				delta = fmt.Sprintf("%s (N × delay = %s)", signedDur(a.P50-z), dur(time.Duration(n)*delay))
			}
			t.Rows = append(t.Rows, []string{strconv.Itoa(n), delay.String(), dur(a.P50), dur(a.P99), dur(b.P50),
				dur(b.Plugins50), dur(a.P50 - b.Plugins50), signedDur(over), signedDur(over / time.Duration(n)),
				ratio(cmp.Ratio(0, 1, MetricP50)), ratio(cmp.Ratio(0, 1, MetricP99)), delta})
			r.logf("chain n=%d delay=%s: sidecar p50 %s, baseline p50 %s, overhead %s", n, delay, dur(a.P50), dur(b.P50), signedDur(over))
		}
	}
	r.rep.Tables = append(r.rep.Tables, t)
	return nil
}
