package bench

import (
	"context"
	"errors"
	"fmt"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Targets of the performance issue, as ratios to the do-nothing server.
const (
	// PassthroughP99Target bounds p99 of a passthrough tools/list.
	PassthroughP99Target = 1.15
	// OnePluginP99Target bounds p99 of one plugin tools/call against
	// do-nothing + the direct plugin call.
	OnePluginP99Target = 1.20
)

// passCase is one row of the passthrough table.
type passCase struct {
	label, short, sidecar string
	x                     *Exchange
	// p50, p99 are the targets against the do-nothing server (0: none).
	p50, p99 float64
	// streamed: the sidecar reads the response body (STREAMED), so the
	// same-modes baseline is minimal STREAMED.
	streamed bool
	// mcpFilter: every target is sent the metadata Envoy's MCP filter
	// writes for the request.
	mcpFilter bool
}

// workloads are the recorded exchanges of the passthrough and allocations
// tables.
type workloads struct {
	list, list26, call, big *Exchange
}

// workloads loads the recorded exchanges; big carries r.bigArgsBytes of
// arguments.
func (r *runner) workloads() (w workloads, err error) {
	if w.list, err = ToolsList(); err != nil {
		return w, err
	}
	if w.list26, err = ToolsList2026(); err != nil {
		return w, err
	}
	if w.call, err = ToolsCall(); err != nil {
		return w, err
	}
	w.big, err = ToolsCallWithArgs(r.bigArgsBytes)
	return w, err
}

// passthroughCases are the passthrough rows; sidecar names a config of
// passthroughConfigs.
func (r *runner) passthroughCases() ([]passCase, error) {
	w, err := r.workloads()
	if err != nil {
		return nil, err
	}
	list, list26, call, big := w.list, w.list26, w.call, w.big
	return []passCase{
		{"tools/list; plugin on tool_pre_invoke only", "tools/list pre-only", "pre", list, Target, PassthroughP99Target, false, false},
		{"tools/list with Envoy's MCP-filter metadata; plugin on tool_pre_invoke only", "tools/list pre-only MCP filter", "pre", list, Target, PassthroughP99Target, false, true},
		{"tools/list, 2026-07-28 headers (Mcp-Method); plugin on tool_pre_invoke+tool_post_invoke", "tools/list post 2026", "pre+post", list26, Target, 0, false, false},
		{"GET SSE stream (no Last-Event-ID); plugin on tool_pre_invoke only", "GET SSE", "pre", GetSSE(8), Target, 0, false, false},
		{"GET SSE stream (no Last-Event-ID); plugin on tool_pre_invoke+tool_post_invoke (stream read event by event)", "GET SSE post", "pre+post", GetSSE(8), 0, 0, true, false},
		{"tools/list; plugin on tool_pre_invoke, conditions tools: [other]", "tools/list", "pre-cond", list, 0, 0, false, false},
		{"tools/call echo; same plugin (conditions do not match)", "tools/call cond-miss", "pre-cond", call, 0, 0, false, false},
		{fmt.Sprintf("tools/call echo, %d KiB arguments; same plugin (conditions do not match)", r.bigArgsBytes>>10), "tools/call big cond-miss", "pre-cond", big, 0, 0, false, false},
		{"tools/call echo; plugin on prompt_pre_fetch only", "tools/call hook-miss", "prompt", call, 0, 0, false, false},
		{"tools/call echo; plugin on tool_pre_invoke+tool_post_invoke, conditions tools: [other]", "tools/call pre+post cond-miss", "both-cond", call, 0, 0, false, false},
	}, nil
}

// passthroughConfigs are the sidecar configs of the passthrough rows.
func passthroughConfigs(url string) map[string]PluginSpec {
	pre, post := cpex.ToolPreInvoke, cpex.ToolPostInvoke
	return map[string]PluginSpec{
		"pre":       {Name: "Guard", URL: url, Hooks: []cpex.HookType{pre}},
		"pre+post":  {Name: "Guard", URL: url, Hooks: []cpex.HookType{pre, post}},
		"pre-cond":  {Name: "Guard", URL: url, Hooks: []cpex.HookType{pre}, Tools: []string{"other"}},
		"prompt":    {Name: "Guard", URL: url, Hooks: []cpex.HookType{cpex.PromptPreFetch}},
		"both-cond": {Name: "Guard", URL: url, Hooks: []cpex.HookType{pre, post}, Tools: []string{"other"}},
	}
}

// passthrough: traffic no plugin applies to; the sidecar vs the same-modes
// minimal server and vs the do-nothing server, interleaved.
func (r *runner) passthrough(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	guard, err := StartPlugin(DelayPlugin("Guard", 0, cpex.ToolPreInvoke, cpex.ToolPostInvoke))
	if err != nil {
		return err
	}
	cl.add(guard)
	mini, err := serveMinimal(&cl, filterv3.ProcessingMode_NONE)
	if err != nil {
		return err
	}
	miniStreamed, err := serveMinimal(&cl, filterv3.ProcessingMode_STREAMED)
	if err != nil {
		return err
	}
	none, err := serveNothing(&cl)
	if err != nil {
		return err
	}
	eps := map[string]*Endpoint{}
	for k, spec := range passthroughConfigs(guard.URL) {
		ep, err := StartSidecar(ctx, "sidecar "+k, SidecarConfig(0, spec))
		if err != nil {
			return fmt.Errorf("sidecar %s: %w", k, err)
		}
		cl.add(ep)
		eps[k] = ep
	}
	cases, err := r.passthroughCases()
	if err != nil {
		return err
	}
	t := Table{
		Title: "1. Passthrough: traffic no plugin applies to (sequential, one stream at a time)",
		Header: []string{"workload", "msgs sc/min/none", "sidecar p50", "p99", "minimal p50", "p99", "nothing p50", "p99",
			"p50 / nothing", "p99 / nothing", "p50 / minimal", "p99 / minimal", "thrpt sc", "thrpt none",
			"allocs/op sc", "min", "none"},
		Notes: []string{
			"sidecar: internal/sidecar.Run with the config named in the row; minimal: CONTINUE to everything, request body BUFFERED, response body NONE (what the sidecar reads on a request no plugin applies to), STREAMED for the GET row with post hooks; nothing: CONTINUE to everything, no mode_override, so Envoy's defaults: request headers and response headers only.",
			"msgs: ext_proc messages per exchange, counted by the driver (each one a gRPC round trip through Envoy: the main cost).",
			"allocs/op: whole process (driver, gRPC client and server, server under test) per exchange.",
			"MCP-filter metadata: every target is sent, on the request headers, what Envoy's MCP filter (envoy.filters.http.mcp, Envoy 1.37+) read from the body.",
		},
	}
	d := &Driver{}
	for _, c := range cases {
		m := mini
		if c.streamed {
			m = miniStreamed
		}
		row, checks, err := r.passthroughRow(ctx, d, c, eps[c.sidecar], m, none)
		if err != nil {
			return err
		}
		t.Rows = append(t.Rows, row)
		r.rep.Checks = append(r.rep.Checks, checks...)
	}
	if n := guard.Calls(); n != 0 {
		return fmt.Errorf("the plugin was called %d times on traffic it does not apply to", n)
	}
	r.rep.Tables = append(r.rep.Tables, t)
	return nil
}

// passthroughRow measures one case against the three targets.
func (r *runner) passthroughRow(ctx context.Context, d *Driver, c passCase, sc, mini, none *Endpoint) ([]string, []Check, error) {
	p := Prepare(c.x)
	if c.mcpFilter {
		if err := forwardMCPFilterMetadata(p); err != nil {
			return nil, nil, err
		}
	}
	ok := untouched(p)
	if c.streamed {
		ok = intact(p) // re-emitted event by event, the same bytes
	}
	msgs, err := messages(ctx, d, p, ok, sc, mini, none)
	if err != nil {
		return nil, nil, err
	}
	cfg := r.seq
	if c.p50 > 0 || c.p99 > 0 {
		cfg = r.fine // a row with a target: twice the rounds (runner.fine)
	}
	cmp, err := Compare(ctx, cfg, exchangeOp(d, sc, p, ok), exchangeOp(d, mini, p, ok), exchangeOp(d, none, p, ok))
	if err != nil {
		return nil, nil, err
	}
	a, b, n := cmp.Median(0), cmp.Median(1), cmp.Median(2)
	n50, n99 := cmp.Ratio(0, 2, MetricP50), cmp.Ratio(0, 2, MetricP99)
	m50, m99 := cmp.Ratio(0, 1, MetricP50), cmp.Ratio(0, 1, MetricP99)
	row := []string{c.label, fmt.Sprintf("%d/%d/%d", msgs[0], msgs[1], msgs[2]),
		dur(a.P50), dur(a.P99), dur(b.P50), dur(b.P99), dur(n.P50), dur(n.P99),
		ratio(n50), ratio(n99), ratio(m50), ratio(m99), rate(a.Throughput), rate(n.Throughput),
		count(a.AllocsPerOp), count(b.AllocsPerOp), count(n.AllocsPerOp)}
	var checks []Check
	if c.p50 > 0 {
		checks = append(checks, Check{Name: "passthrough " + c.short + " p50 / nothing", Ratio: n50, Target: c.p50})
	}
	if c.p99 > 0 {
		checks = append(checks, Check{Name: "passthrough " + c.short + " p99 / nothing", Ratio: n99, Target: c.p99})
	}
	r.logf("passthrough %s: msgs %v, sidecar p50 %s, minimal %s, nothing %s; /nothing %.3f, /minimal %.3f",
		c.short, msgs, dur(a.P50), dur(b.P50), dur(n.P50), n50, m50)
	return row, checks, nil
}
