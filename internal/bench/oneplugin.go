package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/internal/nodeplugin"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver/policy"
)

// onePlugin: tools/call with one enforcing plugin vs Minimal + the same
// invoke_hook called directly, and vs the do-nothing server + that call;
// one row per plugin server family (the Go SDK server, and the TypeScript
// SDK server on Node.js when node is there).
func (r *runner) onePlugin(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	mini, err := serveMinimal(&cl, filterv3.ProcessingMode_NONE)
	if err != nil {
		return err
	}
	none, err := serveNothing(&cl)
	if err != nil {
		return err
	}
	setups := []namedSetup{{name: "Go SDK"}}
	if setups[0].pol, err = startPolicySetup(ctx, &cl); err != nil {
		return err
	}
	if nodeplugin.Check() == nil {
		ts, err := startNodePolicySetup(ctx, &cl)
		if err != nil {
			return fmt.Errorf("TypeScript SDK plugin: %w", err)
		}
		setups = append(setups, namedSetup{name: "TypeScript SDK (Node.js)", pol: ts})
	} else {
		r.logf("one plugin: %v", nodeplugin.Check())
	}
	setups = append(setups, namedSetup{name: "Go SDK, MCP-filter metadata", pol: setups[0].pol, mcpFilter: true})
	var rows []onePluginRow
	for _, s := range setups {
		row, err := r.onePluginCompare(ctx, s, mini, none)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		rows = append(rows, row)
	}
	r.onePluginTable(rows)
	return nil
}

// namedSetup is a policy setup with the name of its plugin server's family.
type namedSetup struct {
	name string
	pol  *policySetup
	// mcpFilter: every target is sent the metadata Envoy's MCP filter
	// writes for the call (the sidecar reads the method from it).
	mcpFilter bool
}

// onePluginRow is what one comparison of the one-plugin scenario measured.
type onePluginRow struct {
	name string
	cmp  *Comparison
	msgs []int
}

// onePluginCompare measures s's sidecar against mini and none, each
// followed by s's direct call.
func (r *runner) onePluginCompare(ctx context.Context, s namedSetup, mini, none *Endpoint) (onePluginRow, error) {
	p, ok, err := preparedToolsCall()
	if err != nil {
		return onePluginRow{}, err
	}
	if s.mcpFilter {
		if err := forwardMCPFilterMetadata(p); err != nil {
			return onePluginRow{}, err
		}
	}
	d := &Driver{}
	msgs, err := messages(ctx, d, p, nil, s.pol.sc, mini, none)
	if err != nil {
		return onePluginRow{}, err
	}
	if err := callsOnce(ctx, d, s.pol.sc, p, ok, s.pol.calls); err != nil {
		return onePluginRow{}, err
	}
	call := s.pol.call
	cmp, err := Compare(ctx, r.fine, exchangeOp(d, s.pol.sc, p, ok),
		baselineOp(d, mini, p, ok, false, false, call), baselineOp(d, none, p, ok, false, false, call),
		baselineOp(d, none, p, ok, false, false, s.pol.own))
	if err != nil {
		return onePluginRow{}, err
	}
	return onePluginRow{name: s.name, cmp: cmp, msgs: msgs}, nil
}

// startNodePolicySetup serves the policy plugin on the TypeScript SDK
// plugin server (a Node.js process) and starts a sidecar to it.
func startNodePolicySetup(ctx context.Context, cl *closers) (*policySetup, error) {
	pol, err := json.Marshal(map[string]any{"plugins": []policy.Config{policyConfig()}})
	if err != nil {
		return nil, err
	}
	srv, err := nodeplugin.Start(nodeplugin.Options{Policy: string(pol)})
	if err != nil {
		return nil, err
	}
	cl.add(closeFunc(func() error { srv.Stop(); return nil }))
	calls := func() int64 {
		st, err := srv.Stats()
		if err != nil {
			return -1
		}
		return int64(st.Invokes)
	}
	return policySetupAt(ctx, cl, "sidecar (TypeScript SDK plugin)", srv.URL(), calls)
}

// onePluginTable reports the one-plugin comparisons (sidecar, min+plugin,
// none+plugin), a row per plugin server family, and records their checks.
func (r *runner) onePluginTable(rows []onePluginRow) {
	t := Table{
		Title: "2. One enforcing plugin: tools/call echo (policy plugin on tool_pre_invoke, sequential, on_error fail)",
		Header: []string{"plugin server", "msgs sc/min/none", "sidecar p50", "p99", "min+plugin p50", "p99", "none+plugin p50", "p99",
			"of which plugin p50", "overhead / none p50", "p50 / none", "p99 / none", "p50 / min", "p99 / min",
			"thrpt sc", "thrpt none", "allocs/op sc", "min", "none", "none+own call p50", "p50 / none+own call"},
		Notes: []string{
			"min+plugin: the exchange with minimal (same body modes as the sidecar), then invoke_hook on the same plugin server with the go-sdk client (same payload and context shape), one after the other; none+plugin: the same with the do-nothing server (request and response headers only).",
			"overhead / none = sidecar − none+plugin (medians). Each row is its own comparison (its four targets side by side in the same rounds).",
			"none+own call: the do-nothing exchange, then the same invoke_hook made with the sidecar's own plugin session (pkg/pluginclient/mcpconn: the go-sdk makes the session, the call is one POST mcpconn reads itself), lighter than the go-sdk client's call; its ratio is the sidecar's cost around the same call, shown beside the checked one.",
			"TypeScript SDK: the plugin server of internal/nodeplugin (McpServer + StreamableHTTPServerTransport on Node.js), reached over MCP like the Go one.",
			"MCP-filter metadata: every target is sent, on the request headers, what Envoy's MCP filter (envoy.filters.http.mcp, Envoy 1.37+) read from the body; the sidecar reads the method from it.",
		},
	}
	for _, row := range rows {
		cmp, msgs := row.cmp, row.msgs
		sa, sb, sn, so := cmp.Median(0), cmp.Median(1), cmp.Median(2), cmp.Median(3)
		rp50, rp99 := cmp.Ratio(0, 1, MetricP50), cmp.Ratio(0, 1, MetricP99)
		np50, np99 := cmp.Ratio(0, 2, MetricP50), cmp.Ratio(0, 2, MetricP99)
		t.Rows = append(t.Rows, []string{row.name, fmt.Sprintf("%d/%d/%d", msgs[0], msgs[1], msgs[2]), dur(sa.P50), dur(sa.P99), dur(sb.P50), dur(sb.P99),
			dur(sn.P50), dur(sn.P99), dur(sn.Plugins50), signedDur(sa.P50 - sn.P50),
			ratio(np50), ratio(np99), ratio(rp50), ratio(rp99), rate(sa.Throughput), rate(sn.Throughput),
			count(sa.AllocsPerOp), count(sb.AllocsPerOp), count(sn.AllocsPerOp), dur(so.P50), ratio(cmp.Ratio(0, 3, MetricP50))})
		prefix := "one plugin"
		if row.name != "Go SDK" {
			prefix += " (" + row.name + ")"
		}
		r.rep.Checks = append(r.rep.Checks,
			Check{Name: prefix + " p50 / nothing+plugin", Ratio: np50, Target: Target},
			Check{Name: prefix + " p99 / nothing+plugin", Ratio: np99, Target: OnePluginP99Target})
		r.logf("%s: msgs %v, sidecar p50 %s, min+plugin %s, none+plugin %s (plugin %s), none+own call %s; /none %.3f, /min %.3f, /none+own call %.3f",
			prefix, msgs, dur(sa.P50), dur(sb.P50), dur(sn.P50), dur(sn.Plugins50), dur(so.P50), np50, rp50, cmp.Ratio(0, 3, MetricP50))
	}
	r.rep.Tables = append(r.rep.Tables, t)
}
