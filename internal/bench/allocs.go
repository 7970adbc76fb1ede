package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
)

// allocCase is one row of the allocations table: a workload through the
// processor built from the passthrough config named proc.
type allocCase struct {
	label, proc string
	x           *Exchange
}

// allocCases are the rows of the allocations table.
func (r *runner) allocCases() ([]allocCase, error) {
	w, err := r.workloads()
	if err != nil {
		return nil, err
	}
	list, call, big := w.list, w.call, w.big
	kib := r.bigArgsBytes >> 10
	return []allocCase{
		{"tools/list; plugin on tool_pre_invoke, cond tools: [other]", "pre-cond", list},
		{"tools/call echo; same (cond-miss)", "pre-cond", call},
		{fmt.Sprintf("tools/call, %d KiB arguments; same (cond-miss)", kib), "pre-cond", big},
		{"tools/call echo; plugin on prompt_pre_fetch only", "prompt", call},
		{fmt.Sprintf("tools/call, %d KiB arguments; plugin on prompt_pre_fetch only", kib), "prompt", big},
		{"tools/call echo; pre+post, cond tools: [other]", "both-cond", call},
	}, nil
}

// allocs: allocations per passthrough stream of the processor itself,
// driven in memory.
func (r *runner) allocs(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	cases, err := r.allocCases()
	if err != nil {
		return err
	}
	// The pool is never started: nothing is called on this traffic, and the
	// executor only reads the configs.
	specs := passthroughConfigs("http://127.0.0.1:9/mcp")
	eps := map[string]*Endpoint{}
	for _, c := range cases {
		if eps[c.proc] != nil {
			continue
		}
		proc, err := NewProcessor(ctx, SidecarConfig(0, specs[c.proc]), false)
		if err != nil {
			return err
		}
		cl.add(proc)
		eps[c.proc] = &Endpoint{Name: "processor " + c.proc, Client: Pipe(proc)}
	}
	mini := &Endpoint{Name: "minimal", Client: Pipe(NewMinimal(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_NONE))}
	t := Table{
		Title:  "6. Allocations per passthrough stream, in memory (processor.Server driven through an in-memory stream: no gRPC)",
		Header: []string{"workload", "request bytes", "msgs", "processor allocs/op", "B/op", "minimal allocs/op", "B/op", "processor's own allocs", "own B"},
		Notes: []string{
			"processor: plugin pool (not started), executor and processor.Server wired as in internal/sidecar, without the metrics observers; minimal: the do-nothing server, whose figures are the harness's own (driver, in-memory stream, one goroutine per stream).",
			"own = processor − minimal. A body copy or a JSON re-encode of the request shows as own B growing with the request size.",
		},
	}
	for _, c := range cases {
		row, err := r.allocRow(ctx, c, eps[c.proc], mini)
		if err != nil {
			return err
		}
		t.Rows = append(t.Rows, row)
	}
	r.rep.Tables = append(r.rep.Tables, t)
	return nil
}

// allocRow measures the allocations of one case through the processor ep
// and through mini.
func (r *runner) allocRow(ctx context.Context, c allocCase, ep, mini *Endpoint) ([]string, error) {
	d := &Driver{}
	p := Prepare(c.x)
	ok := untouched(p)
	o, err := probe(ctx, d, ep, p, ok)
	if err != nil {
		return nil, err
	}
	var stats [2]Stats
	for i, target := range []*Endpoint{ep, mini} {
		op := exchangeOp(d, target, p, ok)
		for range 20 { // warm caches and pools
			if _, err := op(ctx); err != nil {
				return nil, err
			}
		}
		if stats[i], err = sequential(ctx, op, 0, r.allocOps); err != nil {
			return nil, err
		}
	}
	a, b := stats[0], stats[1]
	r.logf("allocs %s: processor %.0f allocs/op %.0f B/op, minimal %.0f/%.0f", c.label, a.AllocsPerOp, a.BytesPerOp, b.AllocsPerOp, b.BytesPerOp)
	return []string{c.label, strconv.Itoa(len(c.x.RequestBody)), strconv.Itoa(o.Messages),
		count(a.AllocsPerOp), count(a.BytesPerOp), count(b.AllocsPerOp), count(b.BytesPerOp),
		count(a.AllocsPerOp - b.AllocsPerOp), count(a.BytesPerOp - b.BytesPerOp)}, nil
}
