package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
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
	return []string{"passthrough", "one-plugin", "chain", "sse", "concurrency", "allocs", "transports", "replicas", "attribution", "identity", "rules", "cpu", "builtin", "pinning", "audit"}
}

// runner holds the settings of one Run.
type runner struct {
	opts                  Options
	seq, chain, sse, load Config
	// fine is seq with twice the rounds, for every comparison that has a
	// target (passthrough, one plugin, identity, rules, lists, built-ins,
	// audit): on a shared 2-core machine the median of 7 rounds moves by
	// ±3 % between runs, and a p50 ratio by up to ±0.1.
	fine                   Config
	levels                 []int
	delays                 []time.Duration
	sseSize, sseChunk      int
	allocOps, bigArgsBytes int
	// cpu scenario: rounds per target, each cpuDuration long on
	// cpuStreams concurrent streams.
	cpuRounds, cpuStreams int
	cpuDuration           time.Duration
	rep                   *Report
}

func newRunner(opts Options) *runner {
	r := &runner{opts: opts, rep: &Report{}}
	if opts.Quick {
		quick := Config{Rounds: 2, MinOps: 3, Warmup: 1}
		r.seq, r.chain, r.sse, r.fine = quick, quick, quick, quick
		r.load = Config{Rounds: 1, Duration: 30 * time.Millisecond}
		r.levels = []int{2, 4}
		r.delays = []time.Duration{0, time.Millisecond}
		r.sseSize, r.sseChunk = 64<<10, 16<<10
		r.allocOps, r.bigArgsBytes = 10, 4<<10
		r.cpuRounds, r.cpuStreams, r.cpuDuration = 1, 2, 50*time.Millisecond
		return r
	}
	r.seq = Config{Rounds: 7, Duration: 800 * time.Millisecond, MinOps: 200, Warmup: 300}
	r.fine = Config{Rounds: 15, Duration: 800 * time.Millisecond, MinOps: 200, Warmup: 300}
	r.chain = Config{Rounds: 5, Duration: 400 * time.Millisecond, MinOps: 30, Warmup: 20}
	r.sse = Config{Rounds: 5, Duration: 500 * time.Millisecond, MinOps: 15, Warmup: 5}
	r.load = Config{Rounds: 3, Duration: 1200 * time.Millisecond}
	r.levels = []int{10, 100, 1000}
	r.delays = []time.Duration{0, 2 * time.Millisecond}
	r.sseSize, r.sseChunk = 1<<20, 16<<10
	r.allocOps, r.bigArgsBytes = 3000, 64<<10
	r.cpuRounds, r.cpuStreams, r.cpuDuration = 3, 16, 2*time.Second
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
		"replicas":    r.replicas,
		"attribution": r.attributionScenario,
		"identity":    r.identityScenario,
		"rules":       r.rulesScenario,
		"cpu":         r.cpuScenario,
		"builtin":     r.builtinScenario,
		"pinning":     r.pinningScenario,
		"audit":       r.auditScenario,
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

// messages probes each target once and returns how many ext_proc messages
// its exchange takes.
func messages(ctx context.Context, d *Driver, p *Prepared, ok check, targets ...*Endpoint) ([]int, error) {
	msgs := make([]int, len(targets))
	for i, ep := range targets {
		o, err := probe(ctx, d, ep, p, ok)
		if err != nil {
			return nil, err
		}
		msgs[i] = o.Messages
	}
	return msgs, nil
}

// serveMinimal serves a Minimal server that asks for the request body
// BUFFERED and the response body in mode resp; cl closes it.
func serveMinimal(cl *closers, resp filterv3.ProcessingMode_BodySendMode) (*Endpoint, error) {
	name := "minimal"
	if resp != filterv3.ProcessingMode_NONE {
		name += " " + resp.String()
	}
	ep, err := Serve(name, NewMinimal(filterv3.ProcessingMode_BUFFERED, resp))
	if err != nil {
		return nil, err
	}
	cl.add(ep)
	return ep, nil
}

// serveNothing serves the do-nothing server; cl closes it.
func serveNothing(cl *closers) (*Endpoint, error) {
	ep, err := Serve("nothing", NewNothing())
	if err != nil {
		return nil, err
	}
	cl.add(ep)
	return ep, nil
}

// preparedToolsCall is the tools/call echo exchange, prepared, and the
// check that it reached the client untouched.
func preparedToolsCall() (*Prepared, check, error) {
	x, err := ToolsCall()
	if err != nil {
		return nil, nil, err
	}
	p := Prepare(x)
	return p, untouched(p), nil
}

// policySetup is what the one-plugin scenarios measure: the enforcing
// plugin (a deny-pattern policy on tool_pre_invoke), a sidecar that calls
// it on every tools/call, and the same call made directly.
type policySetup struct {
	calls func() int64 // invoke_hook calls the plugin server served
	sc    *Endpoint
	call  hookCall // with the go-sdk client
	own   hookCall // with the sidecar's plugin session (mcpconn)
}

// startPolicySetup starts a policySetup with the Go policy plugin server;
// cl closes what it started.
func startPolicySetup(ctx context.Context, cl *closers) (*policySetup, error) {
	pol, err := policyPlugin()
	if err != nil {
		return nil, err
	}
	ps, err := StartPlugin(pol)
	if err != nil {
		return nil, err
	}
	cl.add(ps)
	return policySetupAt(ctx, cl, "sidecar", ps.URL, ps.calls.Load)
}

// policySetupAt starts a sidecar named name and a direct client, both to
// the policy plugin served at url (calls counts what it served).
func policySetupAt(ctx context.Context, cl *closers, name, url string, calls func() int64) (*policySetup, error) {
	sc, err := StartSidecar(ctx, name, SidecarConfig(0, PluginSpec{Name: "Policy", URL: url, Hooks: []cpex.HookType{cpex.ToolPreInvoke}}))
	if err != nil {
		return nil, err
	}
	cl.add(sc)
	direct, err := DialDirect(ctx, url, "Policy")
	if err != nil {
		return nil, err
	}
	cl.add(direct)
	own, err := DialSession(ctx, url, "Policy")
	if err != nil {
		return nil, err
	}
	cl.add(own)
	call := hookCall{d: direct, hook: cpex.ToolPreInvoke, payload: toolPrePayload(), pctx: pluginContext()}
	ownCall := call
	ownCall.d = own
	return &policySetup{calls: calls, sc: sc, call: call, own: ownCall}, nil
}

// policyConfig is the enforcing plugin of the one-plugin scenarios, served
// by the Go policy plugin or by the TypeScript SDK server.
func policyConfig() policy.Config {
	return policy.Config{Name: "Policy", Deny: []string{`(?i)drop\s+table`}, Hooks: []cpex.HookType{cpex.ToolPreInvoke}}
}

// policyPlugin is policyConfig as a Go plugin.
func policyPlugin() (pluginserver.Plugin, error) { return policy.New(policyConfig(), nil) }

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
