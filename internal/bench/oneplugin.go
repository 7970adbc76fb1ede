package bench

import (
	"context"
	"errors"
	"fmt"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
)

// onePlugin: tools/call with one enforcing plugin vs Minimal + the same
// invoke_hook called directly, and vs the do-nothing server + that call.
func (r *runner) onePlugin(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	pol, err := startPolicySetup(ctx, &cl)
	if err != nil {
		return err
	}
	mini, err := serveMinimal(&cl, filterv3.ProcessingMode_NONE)
	if err != nil {
		return err
	}
	none, err := serveNothing(&cl)
	if err != nil {
		return err
	}
	p, ok, err := preparedToolsCall()
	if err != nil {
		return err
	}
	d := &Driver{}
	msgs, err := messages(ctx, d, p, nil, pol.sc, mini, none)
	if err != nil {
		return err
	}
	if err := callsOnce(ctx, d, pol.sc, p, ok, &pol.plugin.calls); err != nil {
		return err
	}
	call := pol.call
	sc := pol.sc
	cmp, err := Compare(ctx, r.seq, exchangeOp(d, sc, p, ok),
		baselineOp(d, mini, p, ok, false, false, call), baselineOp(d, none, p, ok, false, false, call))
	if err != nil {
		return err
	}
	r.onePluginTable(cmp, msgs)
	return nil
}

// onePluginTable reports the one-plugin comparison (sidecar, min+plugin,
// none+plugin) and records its checks.
func (r *runner) onePluginTable(cmp *Comparison, msgs []int) {
	sa, sb, sn := cmp.Median(0), cmp.Median(1), cmp.Median(2)
	rp50, rp99 := cmp.Ratio(0, 1, MetricP50), cmp.Ratio(0, 1, MetricP99)
	np50, np99 := cmp.Ratio(0, 2, MetricP50), cmp.Ratio(0, 2, MetricP99)
	r.rep.Tables = append(r.rep.Tables, Table{
		Title: "2. One enforcing plugin: tools/call echo (policy plugin on tool_pre_invoke, sequential, on_error fail)",
		Header: []string{"msgs sc/min/none", "sidecar p50", "p99", "min+plugin p50", "p99", "none+plugin p50", "p99",
			"of which plugin p50", "overhead / none p50", "p50 / none", "p99 / none", "p50 / min", "p99 / min",
			"thrpt sc", "thrpt none", "allocs/op sc", "min", "none"},
		Rows: [][]string{{fmt.Sprintf("%d/%d/%d", msgs[0], msgs[1], msgs[2]), dur(sa.P50), dur(sa.P99), dur(sb.P50), dur(sb.P99),
			dur(sn.P50), dur(sn.P99), dur(sn.Plugins50), signedDur(sa.P50 - sn.P50),
			ratio(np50), ratio(np99), ratio(rp50), ratio(rp99), rate(sa.Throughput), rate(sn.Throughput),
			count(sa.AllocsPerOp), count(sb.AllocsPerOp), count(sn.AllocsPerOp)}},
		Notes: []string{
			"min+plugin: the exchange with minimal (same body modes as the sidecar), then invoke_hook on the same plugin server with the go-sdk client (same payload and context shape), one after the other; none+plugin: the same with the do-nothing server (request and response headers only).",
			"overhead / none = sidecar − none+plugin (medians).",
		},
	})
	r.rep.Checks = append(r.rep.Checks,
		Check{Name: "one plugin p50 / nothing+plugin", Ratio: np50, Target: Target},
		Check{Name: "one plugin p99 / nothing+plugin", Ratio: np99, Target: OnePluginP99Target})
	r.logf("one plugin: msgs %v, sidecar p50 %s, min+plugin %s, none+plugin %s (plugin %s); /none %.3f, /min %.3f",
		msgs, dur(sa.P50), dur(sb.P50), dur(sn.P50), dur(sn.Plugins50), np50, rp50)
}
