package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// The targets of issue 32 for the built-in plugins.
const (
	DenyHookTarget     = 5 * time.Microsecond  // deny_filter, 1 KB of arguments, p50
	PIIHookTarget      = 30 * time.Microsecond // pii_filter, 4 KB of arguments, p50
	BuiltinCallTarget  = 1.05                  // tools/call with three built-ins / the same call with no plugin
	builtinArgsDeny    = 1 << 10
	builtinArgsPII     = 4 << 10
	builtinPluginsYAML = `  - name: Deny
    kind: plugins.deny_filter.deny.DenyListPlugin
    hooks: [tool_pre_invoke]
    mode: sequential
    config: {words: [innovative, groundbreaking, revolutionary]}
  - name: PII
    kind: plugins.pii_filter.pii_filter.PIIFilterPlugin
    hooks: [tool_pre_invoke]
    mode: sequential
    config: {default_mask_strategy: partial}
  - name: Secrets
    kind: cpex_secrets_detection.SecretsDetectionPlugin
    hooks: [tool_pre_invoke]
    mode: sequential
    config: {block_on_detection: true}
`
	idlePluginYAML = `  - name: Deny
    kind: plugins.deny_filter.deny.DenyListPlugin
    hooks: [tool_pre_invoke]
    mode: sequential
    conditions: [{tools: [no_such_tool]}]
    config: {words: [innovative]}
`
)

// builtinSidecarYAML is the sidecar config of table 13 with the plugins
// entries pluginsYAML.
func builtinSidecarYAML(pluginsYAML string) string {
	return "plugins:\n" + pluginsYAML + "plugin_settings:\n  plugin_timeout: 5\nextproc:\n  mcp_paths: [\"/mcp\"]\n  hook_timeout: 6\n"
}

// textArgs is a tool_pre_invoke payload whose one argument is n bytes of
// prose holding no denied word, PII or secret.
func textArgs(n int) json.RawMessage {
	const prose = "The quick brown fox jumps over the lazy dog and reports to the office at nine. "
	text := strings.Repeat(prose, n/len(prose)+1)[:n]
	b, _ := json.Marshal(cpex.ToolPreInvokePayload{Name: "search", Args: json.RawMessage(`{"query":"` + text + `"}`)})
	return b
}

// hookOp times one in-process invocation that must continue unchanged, as
// the executor makes it when the plugin cannot block (internal/sidecar's
// inProcess hands the Conn over as the executor's LocalPlugin).
func hookOp(c *builtin.Conn, name string, payload json.RawMessage) Op {
	pctx := pluginContext()
	return func(ctx context.Context) (Timing, error) {
		start := time.Now()
		reply, err := c.InvokeHook(ctx, cpex.ToolPreInvoke, name, payload, pctx)
		d := time.Since(start)
		switch {
		case err != nil:
			return Timing{}, err
		case reply.Error != nil:
			return Timing{}, fmt.Errorf("%s: %s", name, reply.Error.Message)
		case !reply.Result.Continue() || reply.Result.Modified():
			return Timing{}, fmt.Errorf("%s did not continue unchanged", name)
		}
		return Timing{TTFB: d, Total: d}, nil
	}
}

// builtinScenario: one in-process hook (deny_filter on 1 KB of arguments,
// pii_filter on 4 KB), and a tools/call through three built-ins vs the
// same call with no plugin (the minimal server, which reads the same
// messages and runs nothing).
func (r *runner) builtinScenario(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	deny, err := builtin.Open("Deny", "plugins.deny_filter.deny.DenyListPlugin",
		map[string]any{"words": []any{"innovative", "groundbreaking", "revolutionary"}})
	if err != nil {
		return err
	}
	cl.add(deny)
	pii, err := builtin.Open("PII", "plugins.pii_filter.pii_filter.PIIFilterPlugin", map[string]any{"default_mask_strategy": "partial"})
	if err != nil {
		return err
	}
	cl.add(pii)
	hooks, err := Compare(ctx, r.seq, hookOp(deny, "Deny", textArgs(builtinArgsDeny)), hookOp(pii, "PII", textArgs(builtinArgsPII)))
	if err != nil {
		return err
	}

	sc, err := StartSidecar(ctx, "sidecar (3 built-ins)", builtinSidecarYAML(builtinPluginsYAML))
	if err != nil {
		return err
	}
	cl.add(sc)
	// The same messages, no plugin run: one built-in whose condition no
	// call matches still makes the sidecar read the request body.
	idle, err := StartSidecar(ctx, "sidecar (no plugin runs)", builtinSidecarYAML(idlePluginYAML))
	if err != nil {
		return err
	}
	cl.add(idle)
	bare, err := StartSidecar(ctx, "sidecar (no plugin)", "plugins: []\nextproc:\n  mcp_paths: [\"/mcp\"]\n")
	if err != nil {
		return err
	}
	cl.add(bare)
	mini, err := serveMinimal(&cl, filterv3.ProcessingMode_NONE)
	if err != nil {
		return err
	}
	p, ok, err := preparedToolsCall()
	if err != nil {
		return err
	}
	d := &Driver{}
	msgs, err := messages(ctx, d, p, ok, sc, idle, bare, mini)
	if err != nil {
		return err
	}
	call, err := Compare(ctx, r.fine, exchangeOp(d, sc, p, ok), exchangeOp(d, idle, p, ok), exchangeOp(d, bare, p, ok), exchangeOp(d, mini, p, ok))
	if err != nil {
		return err
	}

	dh, ph := hooks.Median(0), hooks.Median(1)
	a := call.Median(0)
	row := func(name string, i int) []string {
		b := call.Median(i)
		return []string{name, fmt.Sprintf("%d/%d", msgs[0], msgs[i]), dur(a.P50), dur(a.P99), dur(b.P50), dur(b.P99),
			ratio(call.Ratio(0, i, MetricP50)), count(a.AllocsPerOp), count(b.AllocsPerOp)}
	}
	r.rep.Tables = append(r.rep.Tables, Table{
		Title:  "13. Built-in plugins: in-process hooks, and a tool call through three of them",
		Header: []string{"row", "msgs", "p50", "p99", "baseline p50", "p99", "p50 / baseline", "allocs/op", "baseline"},
		Rows: [][]string{
			{"deny_filter hook, 1 KB of arguments (target p50 ≤ 5 µs)", "-", dur(dh.P50), dur(dh.P99), "-", "-", "-", count(dh.AllocsPerOp), "-"},
			{"pii_filter hook, 4 KB of arguments (target p50 ≤ 30 µs)", "-", dur(ph.P50), dur(ph.P99), "-", "-", "-", count(ph.AllocsPerOp), "-"},
			row("tools/call echo, deny_filter + pii_filter + secrets_detection vs the same call with no plugin run", 1),
			row("the same vs the sidecar with no plugin at all (which does not read the body)", 2),
			row("the same vs the minimal server (reads the request body and the response headers, runs nothing)", 3),
		},
		Notes: []string{
			"A hook is one invocation of a built-in plugin as the executor makes it (builtin.Conn.InvokeHook, called directly: a plugin that cannot block goes through no plugin client), arguments of prose that no plugin acts on. allocs/op count the whole process.",
			"The tool call runs the three plugins in the sidecar's chain (sequential, tool_pre_invoke) on the echo call: request headers and body, 2 messages. \"No plugin run\" is a sidecar with one built-in whose condition matches no call: the same 2 messages, the chain and no plugin, so the ratio is what the three plugins add (the checked target). A sidecar with no plugin at all answers the request headers alone (1 message): that row is the cost of reading the body, not of the plugins.",
		},
	})
	r.rep.Checks = append(r.rep.Checks,
		Check{Name: "deny_filter in-process hook p50 / 5 µs (1 KB)", Ratio: float64(dh.P50) / float64(DenyHookTarget), Target: 1},
		Check{Name: "pii_filter in-process hook p50 / 30 µs (4 KB)", Ratio: float64(ph.P50) / float64(PIIHookTarget), Target: 1},
		Check{Name: "tool call with three built-ins p50 / the same call with no plugin run", Ratio: call.Ratio(0, 1, MetricP50), Target: BuiltinCallTarget},
	)
	r.logf("builtin: deny %s, pii %s, call %s vs %s", dur(dh.P50), dur(ph.P50), dur(a.P50), dur(call.Median(1).P50))
	return nil
}
