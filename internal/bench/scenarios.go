package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver/policy"
)

// Target is the ratio the issue asks for: sidecar / baseline ≤ 1.10.
const Target = 1.10

// Options select what [Run] measures.
type Options struct {
	// Quick runs every scenario for a handful of operations: a smoke test
	// of the harness, not a measurement.
	Quick bool
	// Only, if not empty, names the scenarios to run (see [Scenarios]).
	Only []string
	// Progress receives one line per comparison (nil: none).
	Progress io.Writer
}

// Scenarios returns the scenario names in the order [Run] runs them.
func Scenarios() []string {
	return []string{"passthrough", "one-plugin", "chain", "sse", "concurrency", "allocs", "transports"}
}

// runner holds the settings of one Run.
type runner struct {
	opts                   Options
	seq, chain, sse, load  Config
	levels                 []int
	delays                 []time.Duration
	sseSize, sseChunk      int
	allocOps, bigArgsBytes int
	rep                    *Report
}

func newRunner(opts Options) *runner {
	r := &runner{opts: opts, rep: &Report{}}
	if opts.Quick {
		quick := Config{Rounds: 2, MinOps: 3, Warmup: 1}
		r.seq, r.chain, r.sse = quick, quick, quick
		r.load = Config{Rounds: 1, Duration: 30 * time.Millisecond}
		r.levels = []int{2, 4}
		r.delays = []time.Duration{0, time.Millisecond}
		r.sseSize, r.sseChunk = 64<<10, 16<<10
		r.allocOps, r.bigArgsBytes = 10, 4<<10
		return r
	}
	r.seq = Config{Rounds: 7, Duration: 800 * time.Millisecond, MinOps: 200, Warmup: 300}
	r.chain = Config{Rounds: 5, Duration: 400 * time.Millisecond, MinOps: 30, Warmup: 20}
	r.sse = Config{Rounds: 5, Duration: 500 * time.Millisecond, MinOps: 15, Warmup: 5}
	r.load = Config{Rounds: 3, Duration: 1200 * time.Millisecond}
	r.levels = []int{10, 100, 1000}
	r.delays = []time.Duration{0, 2 * time.Millisecond}
	r.sseSize, r.sseChunk = 1<<20, 16<<10
	r.allocOps, r.bigArgsBytes = 3000, 64<<10
	return r
}

func (r *runner) logf(format string, args ...any) {
	if r.opts.Progress != nil {
		fmt.Fprintf(r.opts.Progress, format+"\n", args...)
	}
}

// Run runs the selected scenarios and returns their report (partial if a
// scenario fails).
func Run(ctx context.Context, opts Options) (*Report, error) {
	r := newRunner(opts)
	steps := map[string]func(context.Context) error{
		"passthrough": r.passthrough,
		"one-plugin":  r.onePlugin,
		"chain":       r.chainScenario,
		"sse":         r.sseScenario,
		"concurrency": r.concurrency,
		"allocs":      r.allocs,
		"transports":  r.transportsScenario,
	}
	for _, name := range opts.Only {
		if steps[name] == nil {
			return nil, fmt.Errorf("unknown scenario %q (have %v)", name, Scenarios())
		}
	}
	for _, name := range Scenarios() {
		if len(opts.Only) > 0 && !slices.Contains(opts.Only, name) {
			continue
		}
		start := time.Now()
		if err := steps[name](ctx); err != nil {
			return r.rep, fmt.Errorf("scenario %s: %w", name, err)
		}
		r.logf("scenario %s done in %s", name, time.Since(start).Round(time.Millisecond))
	}
	return r.rep, nil
}

// closers closes what a scenario started, last first.
type closers []io.Closer

func (c *closers) add(x io.Closer) { *c = append(*c, x) }

func (c closers) close() error {
	var errs []error
	for i := len(c) - 1; i >= 0; i-- {
		errs = append(errs, c[i].Close())
	}
	return errors.Join(errs...)
}

// check validates one outcome.
type check func(Outcome) error

// intact accepts an exchange that reached the client whole and unrefused.
func intact(p *Prepared) check {
	return func(o Outcome) error {
		if o.Immediate != nil {
			return fmt.Errorf("refused: HTTP %d %s", o.Immediate.GetStatus().GetCode(), o.Immediate.GetBody())
		}
		if o.Delivered != p.ResponseLen() {
			return fmt.Errorf("client got %d response bytes, want %d", o.Delivered, p.ResponseLen())
		}
		return nil
	}
}

// untouched is intact with no body mutation at all.
func untouched(p *Prepared) check {
	ok := intact(p)
	return func(o Outcome) error {
		if err := ok(o); err != nil {
			return err
		}
		if o.BodyMutated {
			return errors.New("a body was mutated on traffic no plugin changed")
		}
		return nil
	}
}

// exchangeOp runs one exchange against ep.
func exchangeOp(d *Driver, ep *Endpoint, p *Prepared, ok check) Op {
	return func(ctx context.Context) (Timing, error) {
		o, err := d.Do(ctx, ep.Client, p)
		if err == nil && ok != nil {
			err = ok(o)
		}
		if err != nil {
			return Timing{}, fmt.Errorf("%s: %w", ep.Name, err)
		}
		return Timing{TTFB: o.TTFB, Total: o.Total}, nil
	}
}

// hookCall is one direct plugin call of a baseline.
type hookCall struct {
	d       *Direct
	hook    cpex.HookType
	payload json.RawMessage
	pctx    *cpex.PluginContext
}

// baselineOp runs one exchange against the minimal server, then the plugin
// calls directly, one after the other. Pre-hook time delays the whole
// response; post-hook time delays the end of it, and its first byte too
// when holdFirst (the hooked event is the whole response).
func baselineOp(d *Driver, ep *Endpoint, p *Prepared, ok check, post, holdFirst bool, calls ...hookCall) Op {
	ex := exchangeOp(d, ep, p, ok)
	return func(ctx context.Context) (Timing, error) {
		t, err := ex(ctx)
		if err != nil {
			return t, err
		}
		start := time.Now()
		for _, c := range calls {
			reply, err := c.d.Invoke(ctx, c.hook, c.payload, c.pctx)
			if err != nil {
				return t, err
			}
			if !reply.Result.Continue() {
				return t, fmt.Errorf("plugin %s did not continue", reply.PluginName)
			}
		}
		t.Plugins = time.Since(start)
		t.Total += t.Plugins
		if !post || holdFirst {
			t.TTFB += t.Plugins
		}
		if holdFirst {
			t.TTFB = t.Total
		}
		return t, nil
	}
}

// probe runs one exchange to learn how many messages it takes.
func probe(ctx context.Context, d *Driver, ep *Endpoint, p *Prepared, ok check) (Outcome, error) {
	o, err := d.Do(ctx, ep.Client, p)
	if err == nil && ok != nil {
		err = ok(o)
	}
	if err != nil {
		return o, fmt.Errorf("%s: %w", ep.Name, err)
	}
	return o, nil
}

// pluginContext is the context the processor sends with a request's hooks.
func pluginContext() *cpex.PluginContext {
	return cpex.NewContext(cpex.GlobalContext{
		RequestID: "0b6c7f0e-8c1e-4b7a-9d55-3f1f6c2f9a10",
		Metadata: map[string]any{"path": "/mcp", "authority": "mcp.example.com",
			"mcp_session_id": "3498f650-c053-408a-a2d1-282f8907d0c8"},
	})
}

// toolPrePayload is the tool_pre_invoke payload of the echo call, encoded as
// the processor encodes it.
func toolPrePayload() json.RawMessage {
	b, _ := json.Marshal(cpex.ToolPreInvokePayload{Name: "echo", Args: json.RawMessage(`{"message":"hello"}`)})
	return b
}

// onePlugin: tools/call with one enforcing plugin vs Minimal + the same
// invoke_hook called directly, and vs the do-nothing server + that call.
func (r *runner) onePlugin(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	pol, err := policy.New(policy.Config{Name: "Policy", Deny: []string{`(?i)drop\s+table`}, Hooks: []cpex.HookType{cpex.ToolPreInvoke}}, nil)
	if err != nil {
		return err
	}
	ps, err := StartPlugin(pol)
	if err != nil {
		return err
	}
	cl.add(ps)
	mini, err := Serve("minimal", NewMinimal(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_NONE))
	if err != nil {
		return err
	}
	cl.add(mini)
	none, err := Serve("nothing", NewNothing())
	if err != nil {
		return err
	}
	cl.add(none)
	sc, err := StartSidecar(ctx, "sidecar", SidecarConfig(0, PluginSpec{Name: "Policy", URL: ps.URL, Hooks: []cpex.HookType{cpex.ToolPreInvoke}}))
	if err != nil {
		return err
	}
	cl.add(sc)
	direct, err := DialDirect(ctx, ps.URL, "Policy")
	if err != nil {
		return err
	}
	cl.add(direct)
	x, err := ToolsCall()
	if err != nil {
		return err
	}
	p := Prepare(x)
	ok := untouched(p)
	d := &Driver{}
	call := hookCall{d: direct, hook: cpex.ToolPreInvoke, payload: toolPrePayload(), pctx: pluginContext()}
	a, b := exchangeOp(d, sc, p, ok), baselineOp(d, mini, p, ok, false, false, call)
	c := baselineOp(d, none, p, ok, false, false, call)
	var msgs [3]int
	for i, ep := range []*Endpoint{sc, mini, none} {
		o, err := probe(ctx, d, ep, p, nil)
		if err != nil {
			return err
		}
		msgs[i] = o.Messages
	}
	before := ps.Calls()
	if _, err := a(ctx); err != nil {
		return err
	}
	if ps.Calls() != before+1 {
		return fmt.Errorf("the sidecar called the plugin %d times for one tools/call, want 1", ps.Calls()-before)
	}
	cmp, err := Compare(ctx, r.seq, a, b, c)
	if err != nil {
		return err
	}
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
		Check{Name: "one plugin p50 / minimal+plugin", Ratio: rp50, Target: Target},
		Check{Name: "one plugin p99 / minimal+plugin", Ratio: rp99, Target: Target},
		Check{Name: "one plugin p50 / nothing+plugin", Ratio: np50, Target: Target},
		Check{Name: "one plugin p99 / nothing+plugin", Ratio: np99, Target: OnePluginP99Target})
	r.logf("one plugin: msgs %v, sidecar p50 %s, min+plugin %s, none+plugin %s (plugin %s); /none %.3f, /min %.3f",
		msgs, dur(sa.P50), dur(sb.P50), dur(sn.P50), dur(sn.Plugins50), np50, rp50)
	return nil
}

// chainScenario: 1, 3 and 5 sequential plugins, with and without an
// artificial delay in each.
func (r *runner) chainScenario(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	mini, err := Serve("minimal", NewMinimal(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_NONE))
	if err != nil {
		return err
	}
	cl.add(mini)
	x, err := ToolsCall()
	if err != nil {
		return err
	}
	p := Prepare(x)
	ok := untouched(p)
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

// sseScenario: a large SSE result through STREAMED mode with a post hook,
// vs the same response when no post hook applies.
func (r *runner) sseScenario(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	post, err := StartPlugin(DelayPlugin("Post", 0, cpex.ToolPostInvoke))
	if err != nil {
		return err
	}
	cl.add(post)
	maxBody := 4 << 20 // the one-event shape is a single ~1 MiB event: above the 1 MiB default
	withPost, err := StartSidecar(ctx, "sidecar post hook", SidecarConfig(maxBody, PluginSpec{Name: "Post", URL: post.URL, Hooks: []cpex.HookType{cpex.ToolPostInvoke}}))
	if err != nil {
		return err
	}
	cl.add(withPost)
	pass, err := StartSidecar(ctx, "sidecar passthrough", SidecarConfig(maxBody, PluginSpec{Name: "Post", URL: post.URL, Hooks: []cpex.HookType{cpex.PromptPreFetch}}))
	if err != nil {
		return err
	}
	cl.add(pass)
	mini, err := Serve("minimal STREAMED", NewMinimal(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_STREAMED))
	if err != nil {
		return err
	}
	cl.add(mini)
	direct, err := DialDirect(ctx, post.URL, "Post")
	if err != nil {
		return err
	}
	cl.add(direct)
	t := Table{
		Title: fmt.Sprintf("4. SSE: a %d KiB streamed tools/call result in %d KiB chunks", r.sseSize>>10, r.sseChunk>>10),
		Header: []string{"shape", "target", "msgs", "TTFB p50", "total p50", "total p99",
			"TTFB / passthrough", "total / passthrough", "TTFB / min+plugin", "total / min+plugin"},
		Notes: []string{
			"post hook: sidecar, response switched to STREAMED, tool_post_invoke on a plugin that answers at once; passthrough: sidecar whose plugin has no tool hook (response body NONE).",
			"min+plugin: minimal answering CONTINUE to every chunk in STREAMED mode, plus the same post hook called directly with the result (the inherent cost of streaming through ext_proc and of the plugin).",
			"many-events: ~1 KiB notifications/progress events then a small result; one-event: the result is one ~1 MiB event, which must be held whole before its hook can run, so its first byte waits for the hook.",
		},
	}
	d := &Driver{}
	for _, shape := range []string{ManyEvents, OneEvent} {
		x, result, err := StreamedToolsCall(shape, r.sseSize, r.sseChunk)
		if err != nil {
			return err
		}
		p := Prepare(x)
		ok := intact(p)
		payload, err := json.Marshal(cpex.ToolPostInvokePayload{Name: "echo", Result: result})
		if err != nil {
			return err
		}
		call := hookCall{d: direct, hook: cpex.ToolPostInvoke, payload: payload, pctx: pluginContext()}
		targets := []*Endpoint{withPost, pass, mini}
		msgs := make([]int, len(targets))
		for i, ep := range targets {
			o, err := probe(ctx, d, ep, p, ok)
			if err != nil {
				return err
			}
			msgs[i] = o.Messages
		}
		before := post.Calls()
		cmp, err := Compare(ctx, r.sse,
			exchangeOp(d, withPost, p, ok),
			exchangeOp(d, pass, p, ok),
			baselineOp(d, mini, p, ok, true, shape == OneEvent, call))
		if err != nil {
			return err
		}
		if post.Calls() == before {
			return errors.New("the post hook never reached the plugin")
		}
		for i, name := range []string{"post hook", "passthrough", "min+plugin"} {
			s := cmp.Median(i)
			t.Rows = append(t.Rows, []string{shape, name, strconv.Itoa(msgs[i]), dur(s.TTFB50), dur(s.P50), dur(s.P99),
				ratio(cmp.Ratio(i, 1, MetricTTFB)), ratio(cmp.Ratio(i, 1, MetricP50)),
				ratio(cmp.Ratio(i, 2, MetricTTFB)), ratio(cmp.Ratio(i, 2, MetricP50))})
		}
		r.logf("sse %s: post hook total p50 %s, passthrough %s, min+plugin %s", shape,
			dur(cmp.Median(0).P50), dur(cmp.Median(1).P50), dur(cmp.Median(2).P50))
	}
	r.rep.Tables = append(r.rep.Tables, t)
	return nil
}

// concurrency: many concurrent streams, passthrough and one plugin.
func (r *runner) concurrency(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	guard, err := StartPlugin(DelayPlugin("Guard", 0, cpex.ToolPreInvoke))
	if err != nil {
		return err
	}
	cl.add(guard)
	pol, err := policy.New(policy.Config{Name: "Policy", Deny: []string{`(?i)drop\s+table`}, Hooks: []cpex.HookType{cpex.ToolPreInvoke}}, nil)
	if err != nil {
		return err
	}
	ps, err := StartPlugin(pol)
	if err != nil {
		return err
	}
	cl.add(ps)
	mini, err := Serve("minimal", NewMinimal(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_NONE))
	if err != nil {
		return err
	}
	cl.add(mini)
	passSC, err := StartSidecar(ctx, "sidecar", SidecarConfig(0, PluginSpec{Name: "Guard", URL: guard.URL, Hooks: []cpex.HookType{cpex.ToolPreInvoke}, Tools: []string{"other"}}))
	if err != nil {
		return err
	}
	cl.add(passSC)
	polSC, err := StartSidecar(ctx, "sidecar", SidecarConfig(0, PluginSpec{Name: "Policy", URL: ps.URL, Hooks: []cpex.HookType{cpex.ToolPreInvoke}}))
	if err != nil {
		return err
	}
	cl.add(polSC)
	direct, err := DialDirect(ctx, ps.URL, "Policy")
	if err != nil {
		return err
	}
	cl.add(direct)
	x, err := ToolsCall()
	if err != nil {
		return err
	}
	p := Prepare(x)
	ok := untouched(p)
	d := &Driver{}
	call := hookCall{d: direct, hook: cpex.ToolPreInvoke, payload: toolPrePayload(), pctx: pluginContext()}
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

// allocs: allocations per passthrough stream of the processor itself,
// driven in memory.
func (r *runner) allocs(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	// The pool is never started: nothing is called on this traffic, and the
	// executor only reads the configs.
	const url = "http://127.0.0.1:9/mcp"
	procs := map[string]string{
		"pre-cond":  SidecarConfig(0, PluginSpec{Name: "Guard", URL: url, Hooks: []cpex.HookType{cpex.ToolPreInvoke}, Tools: []string{"other"}}),
		"prompt":    SidecarConfig(0, PluginSpec{Name: "Guard", URL: url, Hooks: []cpex.HookType{cpex.PromptPreFetch}}),
		"both-cond": SidecarConfig(0, PluginSpec{Name: "Guard", URL: url, Hooks: []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke}, Tools: []string{"other"}}),
	}
	eps := map[string]*Endpoint{}
	for k, yaml := range procs {
		proc, err := NewProcessor(ctx, yaml, false)
		if err != nil {
			return err
		}
		cl.add(proc)
		eps[k] = &Endpoint{Name: "processor " + k, Client: Pipe(proc)}
	}
	mini := &Endpoint{Name: "minimal", Client: Pipe(NewMinimal(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_NONE))}
	list, err := ToolsList()
	if err != nil {
		return err
	}
	call, err := ToolsCall()
	if err != nil {
		return err
	}
	big, err := ToolsCallWithArgs(r.bigArgsBytes)
	if err != nil {
		return err
	}
	cases := []struct {
		label, proc string
		x           *Exchange
	}{
		{"tools/list; plugin on tool_pre_invoke, cond tools: [other]", "pre-cond", list},
		{"tools/call echo; same (cond-miss)", "pre-cond", call},
		{fmt.Sprintf("tools/call, %d KiB arguments; same (cond-miss)", r.bigArgsBytes>>10), "pre-cond", big},
		{"tools/call echo; plugin on prompt_pre_fetch only", "prompt", call},
		{fmt.Sprintf("tools/call, %d KiB arguments; plugin on prompt_pre_fetch only", r.bigArgsBytes>>10), "prompt", big},
		{"tools/call echo; pre+post, cond tools: [other]", "both-cond", call},
	}
	t := Table{
		Title:  "6. Allocations per passthrough stream, in memory (processor.Server driven through an in-memory stream: no gRPC)",
		Header: []string{"workload", "request bytes", "msgs", "processor allocs/op", "B/op", "minimal allocs/op", "B/op", "processor's own allocs", "own B"},
		Notes: []string{
			"processor: plugin pool (not started), executor and processor.Server wired as in internal/sidecar, without the metrics observers; minimal: the do-nothing server, whose figures are the harness's own (driver, in-memory stream, one goroutine per stream).",
			"own = processor − minimal. A body copy or a JSON re-encode of the request shows as own B growing with the request size.",
		},
	}
	d := &Driver{}
	for _, c := range cases {
		p := Prepare(c.x)
		ok := untouched(p)
		ep := eps[c.proc]
		o, err := probe(ctx, d, ep, p, ok)
		if err != nil {
			return err
		}
		var stats [2]Stats
		for i, target := range []*Endpoint{ep, mini} {
			op := exchangeOp(d, target, p, ok)
			for range 20 { // warm caches and pools
				if _, err := op(ctx); err != nil {
					return err
				}
			}
			if stats[i], err = sequential(ctx, op, 0, r.allocOps); err != nil {
				return err
			}
		}
		a, b := stats[0], stats[1]
		t.Rows = append(t.Rows, []string{c.label, strconv.Itoa(len(c.x.RequestBody)), strconv.Itoa(o.Messages),
			count(a.AllocsPerOp), count(a.BytesPerOp), count(b.AllocsPerOp), count(b.BytesPerOp),
			count(a.AllocsPerOp - b.AllocsPerOp), count(a.BytesPerOp - b.BytesPerOp)})
		r.logf("allocs %s: processor %.0f allocs/op %.0f B/op, minimal %.0f/%.0f", c.label, a.AllocsPerOp, a.BytesPerOp, b.AllocsPerOp, b.BytesPerOp)
	}
	r.rep.Tables = append(r.rep.Tables, t)
	return nil
}
