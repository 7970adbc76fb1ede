package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/ruleset"
)

// RulesTarget bounds what 20 rules may add to a tool call with one plugin.
const RulesTarget = 1.05

// ListTarget bounds a filtered list's p50 against a server that only
// reads the same answer (issue 28).
const ListTarget = 2.0

// Sizes of the rules scenario.
const (
	benchRules      = 20
	benchListTools  = 200
	benchAdminTools = 50 // of benchListTools, hidden from a caller without the admin role
)

// ToolsListOf is a tools/list answered (JSON, with content-length) with n
// tools shaped as real servers list them (description, input schema); the
// first admin of them are named admin_<i>, the others tool_<i>.
func ToolsListOf(n, admin int) (*Exchange, error) {
	type tool struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"inputSchema"`
	}
	tools := make([]tool, n)
	for i := range tools {
		name := fmt.Sprintf("tool_%d", i)
		if i < admin {
			name = fmt.Sprintf("admin_%d", i)
		}
		tools[i] = tool{Name: name, Description: "Does " + name + " to the target and reports what changed.",
			InputSchema: map[string]any{"type": "object", "required": []string{"target"}, "properties": map[string]any{
				"target": map[string]any{"type": "string", "description": "What to act on."},
				"dryRun": map[string]any{"type": "boolean", "description": "Report only."},
			}}}
	}
	result, err := json.Marshal(map[string]any{"tools": tools})
	if err != nil {
		return nil, fmt.Errorf("tools list: %w", err)
	}
	body := []byte(`{"jsonrpc":"2.0","id":2,"result":` + string(result) + `}`)
	return &Exchange{
		RequestHeaders: mcpRequestHeaders(len(toolsListBody)), RequestBody: []byte(toolsListBody),
		ResponseHeaders: []Header{{":status", "200"}, {"content-type", "application/json"}, {"content-length", strconv.Itoa(len(body))}},
		ResponseBody:    [][]byte{body},
	}, nil
}

// listVariants are how many answers of other bytes the cold list row
// cycles through: 256 lists of ~66 KB are more than the sidecar's memo of
// list answers keeps (8 MiB, processor/listmemo.go), so each is read anew.
const listVariants = 256

// coldListOp is exchangeOp over variants of one list answer, each
// exchange the next of them: an answer the sidecar has not read before
// (the same tools, a serial number in the first description).
func coldListOp(d *Driver, ep *Endpoint, variants []*Prepared, ok check) Op {
	ops := make([]Op, len(variants))
	for k, p := range variants {
		ops[k] = exchangeOp(d, ep, p, ok)
	}
	i := 0
	return func(ctx context.Context) (Timing, error) {
		op := ops[i%len(ops)]
		i++
		return op(ctx)
	}
}

// listVariantsOf returns n variants of x, a tools/list exchange whose
// answer's first description names a serial number of fixed width.
func listVariantsOf(x *Exchange, n int) ([]*Prepared, error) {
	const mark = "Does admin_0 to"
	body := x.ResponseBody[0]
	at := bytes.Index(body, []byte(mark))
	if at < 0 {
		return nil, fmt.Errorf("list variants: %q not in the answer", mark)
	}
	out := make([]*Prepared, n)
	for i := range out {
		v := *x
		b := bytes.Clone(body)
		copy(b[at:], fmt.Sprintf("Does adm%04d to", i)) // as long as mark
		v.ResponseBody = [][]byte{b}
		out[i] = Prepare(&v)
	}
	return out, nil
}

// listedCount checks that the client got a tools/list of want tools.
func listedCount(want int) check {
	return func(o Outcome) error {
		if o.Immediate != nil {
			return fmt.Errorf("tools/list refused: %s", o.Immediate.GetBody())
		}
		if o.ResponseBody == nil {
			return nil // not recorded: checked once by the probe
		}
		var m struct {
			Result struct {
				Tools []json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal(o.ResponseBody, &m); err != nil {
			return fmt.Errorf("tools/list answer: %w", err)
		}
		if len(m.Result.Tools) != want {
			return fmt.Errorf("tools/list listed %d tools, want %d", len(m.Result.Tools), want)
		}
		return nil
	}
}

// rulesScenario: tools/call echo with one enforcing plugin and 20 rules vs
// the same call without rules; tools/list of 200 tools filtered by the
// rules (50 hidden) vs the same list through a sidecar without rules.
func (r *runner) rulesScenario(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	ps, base, today, err := policyToday(ctx, &cl)
	if err != nil {
		return err
	}
	ruled, err := StartSidecar(ctx, "sidecar (20 rules)", base+ruleset.Twenty())
	if err != nil {
		return err
	}
	cl.add(ruled)

	p, ok, err := preparedToolsCall()
	if err != nil {
		return err
	}
	d := &Driver{}
	if err := callsOnce(ctx, d, ruled, p, ok, ps.calls.Load); err != nil {
		return err
	}
	call, callMsgs, err := r.ruledVsToday(ctx, d, p, ok, ruled, today)
	if err != nil {
		return err
	}
	r.rep.Checks = append(r.rep.Checks, Check{Name: "tool call with 20 rules p50 / without rules, without Envoy's MCP filter", Ratio: call.Ratio(0, 1, MetricP50), Target: RulesTarget})

	// The same call from a client speaking MCP 2026-07-28: its headers say
	// it is no list, so the answer is not read, with rules or without.
	x26, err := toolsCall2026()
	if err != nil {
		return err
	}
	p26 := Prepare(x26)
	ok26 := untouched(p26)
	call26, call26Msgs, err := r.ruledVsToday(ctx, d, p26, ok26, ruled, today)
	if err != nil {
		return err
	}

	// The 2025-11-25 call behind Envoy's MCP filter, as envoy/envoy.yaml
	// ships it: its metadata names the method, for both sidecars.
	pm, okm, err := preparedToolsCall()
	if err != nil {
		return err
	}
	if err := forwardMCPFilterMetadata(pm); err != nil {
		return err
	}
	callMCP, callMCPMsgs, err := r.ruledVsToday(ctx, d, pm, okm, ruled, today)
	if err != nil {
		return err
	}
	r.rep.Checks = append(r.rep.Checks, Check{Name: "tool call with 20 rules p50 / without rules, behind Envoy's MCP filter", Ratio: callMCP.Ratio(0, 1, MetricP50), Target: RulesTarget})

	lx, err := ToolsListOf(benchListTools, benchAdminTools)
	if err != nil {
		return err
	}
	lp := Prepare(lx)
	filtered, whole := listedCount(benchListTools-benchAdminTools), untouched(lp)
	rec := &Driver{Record: true}
	if _, err := exchangeOp(rec, ruled, lp, filtered)(ctx); err != nil {
		return err
	}
	if _, err := exchangeOp(rec, today, lp, listedCount(benchListTools))(ctx); err != nil {
		return err
	}
	listMsgs, err := messages(ctx, d, lp, nil, ruled, today)
	if err != nil {
		return err
	}
	// The floor of reading an answer: a server that buffers it and
	// changes nothing.
	reader, err := serveMinimal(&cl, filterv3.ProcessingMode_BUFFERED)
	if err != nil {
		return err
	}
	readerMsgs, err := messages(ctx, d, lp, nil, reader)
	if err != nil {
		return err
	}
	list, err := Compare(ctx, r.fine, exchangeOp(d, ruled, lp, filtered), exchangeOp(d, today, lp, whole), exchangeOp(d, reader, lp, whole))
	if err != nil {
		return err
	}
	r.rep.Checks = append(r.rep.Checks, Check{Name: fmt.Sprintf("tools/list of %d tools filtered by %d rules p50 / reading it (BUFFERED)", benchListTools, benchRules),
		Ratio: list.Ratio(0, 2, MetricP50), Target: ListTarget})
	// The same list, an answer of other bytes every time: what the first
	// list of a server's tools costs (no parse remembered), against the
	// reading server on the same answers.
	variants, err := listVariantsOf(lx, listVariants)
	if err != nil {
		return err
	}
	cold, err := Compare(ctx, r.fine, coldListOp(d, ruled, variants, filtered), coldListOp(d, reader, variants, untouched(variants[0])))
	if err != nil {
		return err
	}
	r.rulesTable([]rulesRow{
		{name: "tools/call echo, 20 rules (none denies) vs no rules", cmp: call, msgs: fmt.Sprintf("%d/%d", callMsgs[0], callMsgs[1])},
		{name: "the same, 2026-07-28 headers (Mcp-Method, Mcp-Name)", cmp: call26, msgs: fmt.Sprintf("%d/%d", call26Msgs[0], call26Msgs[1])},
		{name: "the 2025-11-25 call behind Envoy's MCP filter (the method in its metadata)", cmp: callMCP, msgs: fmt.Sprintf("%d/%d", callMCPMsgs[0], callMCPMsgs[1])},
		{name: fmt.Sprintf("tools/list of %d tools, %d hidden by a rule vs no rules", benchListTools, benchAdminTools), cmp: list,
			msgs: fmt.Sprintf("%d/%d", listMsgs[0], listMsgs[1])},
		{name: "the same list vs a server that reads the answer (BUFFERED) and changes nothing", cmp: list, b: 2,
			msgs: fmt.Sprintf("%d/%d", listMsgs[0], readerMsgs[0])},
		{name: fmt.Sprintf("the same list, its answer other bytes each time (%d variants: never a parse remembered) vs the reading server", listVariants), cmp: cold,
			msgs: fmt.Sprintf("%d/%d", listMsgs[0], readerMsgs[0])},
	})
	return nil
}

type rulesRow struct {
	name string
	cmp  *Comparison
	b    int // the baseline's index in cmp (0: target 1)
	msgs string
}

func (r *runner) rulesTable(rows []rulesRow) {
	t := Table{
		Title:  "11. Rules: extproc.rules (CEL) on a tool call, and a tools/list filtered by them",
		Header: []string{"row", "msgs", "rules p50", "p99", "no rules p50", "p99", "p50 / no rules", "p99 / no rules", "allocs/op rules", "no rules"},
		Notes: []string{
			"Both sidecars call one enforcing plugin (tool_pre_invoke) on the echo call. The 20 rules (internal/bench/rules.go) mix role, tool-name, argument, tenant and header rules; none denies echo. With rules, a request whose headers do not name its method (MCP 2025-11-25) may be a list, so its response headers are asked for (one ext_proc message more, 3 instead of 2); with 2026-07-28 headers a tools/call is known not to be one.",
			"Behind Envoy's MCP filter (envoy/envoy.yaml: envoy.filters.http.mcp before ext_proc, its namespace forwarded), the request-headers message carries the method Envoy read from the body, so a 2025-11-25 tools/call is known not to be a list: 2 messages, as with 2026-07-28 headers. Both sidecars get the same metadata.",
			"tools/list: 200 tools (~330 bytes each, JSON answer); one rule hides the 50 admin_ tools from the caller, who has no admin role. Without rules the sidecar does not read the answer; with rules it reads it (one response-headers and one buffered response-body message more) and rewrites it without the hidden items. The sidecar remembers the parse of a list answer by its bytes (processor/listmemo.go), so the rows above read a parse remembered after the first list, as a server answering every client with the same list; the last row cycles through answers it has not read (a serial number in the first description), the cost of a list's first reading.",
		},
	}
	r.addComparisonRows(&t, "rules", rows)
}

// addComparisonRows adds each row's target (index 0) against its
// baseline to t: latencies, their ratios and allocations; then t to the
// report. label prefixes the progress lines.
func (r *runner) addComparisonRows(t *Table, label string, rows []rulesRow) {
	for _, row := range rows {
		base := max(row.b, 1)
		a, b := row.cmp.Median(0), row.cmp.Median(base)
		p50, p99 := row.cmp.Ratio(0, base, MetricP50), row.cmp.Ratio(0, base, MetricP99)
		t.Rows = append(t.Rows, []string{row.name, row.msgs, dur(a.P50), dur(a.P99), dur(b.P50), dur(b.P99), ratio(p50), ratio(p99),
			count(a.AllocsPerOp), count(b.AllocsPerOp)})
		r.logf("%s: %s: p50 %s vs %s (%.3f), p99 %.3f", label, row.name, dur(a.P50), dur(b.P50), p50, p99)
	}
	r.rep.Tables = append(r.rep.Tables, *t)
}

// toolsCall2026 is [ToolsCall] from a client speaking MCP 2026-07-28: the
// method and the tool are in headers too.
func toolsCall2026() (*Exchange, error) {
	x, err := ToolsCall()
	if err != nil {
		return nil, err
	}
	x.RequestHeaders = with2026Headers(x.RequestHeaders, Header{"mcp-method", "tools/call"}, Header{"mcp-name", "echo"})
	return x, nil
}

// forwardMCPFilterMetadata adds to p's messages the metadata Envoy's MCP
// filter writes for p's request body.
func forwardMCPFilterMetadata(p *Prepared) error {
	meta, invalid := envoytest.MCPFilterMetadata(p.x.RequestBody, 8192)
	if invalid || meta == nil {
		return fmt.Errorf("Envoy's MCP filter would not read %s", p.x.RequestBody)
	}
	p.forwardMetadata(&corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{envoytest.MCPFilterNamespace: meta}})
	return nil
}

// ruledVsToday counts the ext_proc messages of p through the sidecar with
// rules and through today's, then compares the two side by side.
func (r *runner) ruledVsToday(ctx context.Context, d *Driver, p *Prepared, ok check, ruled, today *Endpoint) (*Comparison, []int, error) {
	msgs, err := messages(ctx, d, p, ok, ruled, today)
	if err != nil {
		return nil, nil, err
	}
	cmp, err := Compare(ctx, r.fine, exchangeOp(d, ruled, p, ok), exchangeOp(d, today, p, ok))
	return cmp, msgs, err
}
