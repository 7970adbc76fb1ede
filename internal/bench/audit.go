package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// AuditTarget bounds what audit events add to a tool call (issue 31).
const AuditTarget = 1.03

// auditConfig turns audit events on, written as JSON lines to path.
func auditConfig(path string) string {
	return fmt.Sprintf("  audit:\n    enabled: true\n    sink: file\n    path: %q\n", path)
}

// auditScenario: tools/call echo with one enforcing plugin, with audit
// events on (one event per call, JSON lines to a file) vs the same
// sidecar without them. Each runs on two sidecars started in mirrored
// order, as the identity rows do.
func (r *runner) auditScenario(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	_, base, plain, err := policyToday(ctx, &cl)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "mcp-extproc-bench-audit-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	paths := [2]string{filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")}
	var sc [4]*Endpoint
	sc[0] = plain
	for i, c := range []struct{ name, yaml string }{
		{"sidecar (audit)", base + auditConfig(paths[0])},
		{"sidecar (audit, 2)", base + auditConfig(paths[1])},
		{"sidecar 2", base},
	} {
		if sc[i+1], err = StartSidecar(ctx, c.name, c.yaml); err != nil {
			return err
		}
		cl.add(sc[i+1])
	}
	x, err := ToolsCall()
	if err != nil {
		return err
	}
	p := Prepare(x)
	d := &Driver{}
	msgs, err := messages(ctx, d, p, untouched(p), sc[1], sc[0])
	if err != nil {
		return err
	}
	const pairs = 2
	cmp, err := Compare(ctx, r.fine,
		exchangeOp(d, sc[1], p, untouched(p)), exchangeOp(d, sc[0], p, untouched(p)),
		exchangeOp(d, sc[3], p, untouched(p)), exchangeOp(d, sc[2], p, untouched(p)))
	if err != nil {
		return err
	}
	// The row measures nothing unless the events were written.
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(b, []byte(`"method":"tools/call"`)) {
			return fmt.Errorf("audit: no event in %s (%v): the audited sidecar did not audit", path, err)
		}
	}
	ratio50 := cmp.RatioOfPairs(0, pairs, 1, 1+pairs, MetricP50)
	r.rep.Checks = append(r.rep.Checks, Check{Name: "tool call with audit events p50 / without", Ratio: ratio50, Target: AuditTarget})
	a, b := cmp.Median(0), cmp.Median(1)
	t := Table{
		Title:  "15. Audit events: tools/call echo with one enforcing plugin, extproc.audit on (one JSON line per call to a file) vs off",
		Header: []string{"row", "msgs", "audit p50", "p99", "off p50", "p99", "p50 / off", "p99 / off", "allocs/op audit", "off"},
		Notes: []string{
			"Each target runs on two sidecars started in mirrored order; the latencies shown are the first instances', the ratios those of the sums over both (RatioOfPairs).",
			"The event is built on the request path (caller, hashes of the arguments, each plugin's verdict and latency) and handed to a bounded queue; encoding and writing happen on the audit logger's goroutine.",
		},
	}
	t.Rows = append(t.Rows, []string{"tools/call with audit, vs without", fmt.Sprintf("%d/%d", msgs[0], msgs[1]), dur(a.P50), dur(a.P99), dur(b.P50), dur(b.P99),
		ratio(ratio50), ratio(cmp.RatioOfPairs(0, pairs, 1, 1+pairs, MetricP99)), count(a.AllocsPerOp), count(b.AllocsPerOp)})
	r.logf("audit: p50 %s vs %s (%.3f)", dur(a.P50), dur(b.P50), ratio50)
	r.rep.Tables = append(r.rep.Tables, t)
	return nil
}
