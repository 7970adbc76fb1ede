package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

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
	mini, err := serveMinimal(&cl, filterv3.ProcessingMode_STREAMED)
	if err != nil {
		return err
	}
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
		msgs, err := messages(ctx, d, p, ok, withPost, pass, mini)
		if err != nil {
			return err
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
