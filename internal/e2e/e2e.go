// Package e2e is the end-to-end driver: an MCP client that pushes a scripted
// session, or a sustained load, through Envoy (real, or the fake of
// internal/envoytest) to the mcp-echo server, with the example plugin
// enforcing its policy. The demo, the local end-to-end tests and
// `make kind-e2e` all run this same code.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/internal/mcpecho"
)

// Verdict is what happened to one call.
type Verdict string

// The verdicts of a step.
const (
	Allowed  Verdict = "allowed"  // the server's answer arrived unchanged
	Blocked  Verdict = "blocked"  // a plugin refused the call (JSON-RPC error)
	Modified Verdict = "modified" // a plugin rewrote the call or its result
	Failed   Verdict = "failed"   // anything else: transport error, unexpected answer
)

// Outcome is the result of one scripted step.
type Outcome struct {
	Step    string
	Method  string
	Verdict Verdict
	Detail  string
	Want    Verdict
}

// OK reports whether the step ended as the script expects.
func (o Outcome) OK() bool { return o.Verdict == o.Want }

// Connect opens an MCP session to url.
func Connect(ctx context.Context, url string, hc *http.Client) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "mcp-extproc-e2e", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", url, err)
	}
	return cs, nil
}

// The demo policy the example plugin enforces (see cmd/demo and
// manifests/): tool calls mentioning "drop table" are denied, e-mail
// addresses are redacted in arguments and results.
const (
	DeniedText   = "please DROP TABLE users"
	SecretEmail  = "alice@example.com"
	RedactedMark = "[REDACTED]"
)

// Script runs the scripted session and returns one outcome per step.
func Script(ctx context.Context, url string, hc *http.Client) ([]Outcome, error) {
	cs, err := Connect(ctx, url, hc)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	var out []Outcome
	add := func(step, method string, want Verdict, v Verdict, detail string) {
		out = append(out, Outcome{Step: step, Method: method, Verdict: v, Detail: detail, Want: want})
	}

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		add("list tools", "tools/list", Allowed, Failed, err.Error())
	} else {
		add("list tools", "tools/list", Allowed, Allowed, fmt.Sprintf("%d tools", len(tools.Tools)))
	}

	echo := func(step, msg string, want Verdict) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
		v, detail := classifyTool(res, err, "echo: "+msg)
		add(step, "tools/call", want, v, detail)
	}
	echo("echo a harmless message", "hello world", Allowed)
	echo("echo a denied message", DeniedText, Blocked)
	echo("echo a message with an e-mail address", "mail "+SecretEmail+" now", Modified)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": 3},
		Meta: mcp.Meta{"progressToken": "demo-1"}})
	v, detail := classifyTool(res, err, "done after 3 steps")
	add("long call with progress notifications (SSE)", "tools/call", Allowed, v, detail)

	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greeting", Arguments: map[string]string{"city": "Paris"}})
	switch {
	case err != nil:
		add("get a prompt", "prompts/get", Allowed, classifyErr(err), err.Error())
	case len(pr.Messages) == 1:
		add("get a prompt", "prompts/get", Allowed, Allowed, textOf(pr.Messages[0].Content))
	default:
		add("get a prompt", "prompts/get", Allowed, Failed, fmt.Sprintf("%d messages", len(pr.Messages)))
	}

	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpecho.ResourceURI})
	switch {
	case err != nil:
		add("read a resource holding an e-mail address", "resources/read", Modified, classifyErr(err), err.Error())
	case len(rr.Contents) == 1 && rr.Contents[0].Text == mcpecho.ResourceText:
		add("read a resource holding an e-mail address", "resources/read", Modified, Allowed, rr.Contents[0].Text)
	case len(rr.Contents) == 1 && strings.Contains(rr.Contents[0].Text, RedactedMark):
		add("read a resource holding an e-mail address", "resources/read", Modified, Modified, rr.Contents[0].Text)
	default:
		add("read a resource holding an e-mail address", "resources/read", Modified, Failed, fmt.Sprintf("%+v", rr.Contents))
	}
	return out, nil
}

func classifyTool(res *mcp.CallToolResult, err error, unchanged string) (Verdict, string) {
	if err != nil {
		return classifyErr(err), err.Error()
	}
	if len(res.Content) != 1 {
		return Failed, fmt.Sprintf("%d content blocks", len(res.Content))
	}
	text := textOf(res.Content[0])
	switch {
	case res.IsError:
		return Failed, text
	case text == unchanged:
		return Allowed, text
	case strings.Contains(text, RedactedMark):
		return Modified, text
	}
	return Failed, "unexpected result: " + text
}

func classifyErr(err error) Verdict {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return Blocked
	}
	return Failed
}

func textOf(c mcp.Content) string {
	if t, ok := c.(*mcp.TextContent); ok {
		return t.Text
	}
	return fmt.Sprintf("%T", c)
}

// LoadResult sums up a load run.
type LoadResult struct {
	Calls    int64
	Failures int64
	// FirstErrors holds up to 5 failure messages.
	FirstErrors []string
}

// Load runs concurrency workers, each with its own MCP session, calling the
// echo tool with a harmless message until ctx is done. Any error or unexpected
// answer is a failure.
func Load(ctx context.Context, url string, hc *http.Client, concurrency int) LoadResult {
	var (
		calls, failures atomic.Int64
		mu              sync.Mutex
		firstErrs       []string
		wg              sync.WaitGroup
	)
	fail := func(msg string) {
		failures.Add(1)
		mu.Lock()
		if len(firstErrs) < 5 {
			firstErrs = append(firstErrs, msg)
		}
		mu.Unlock()
	}
	for w := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			cs, err := Connect(cctx, url, hc)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					fail(err.Error())
				}
				return
			}
			defer cs.Close()
			for i := 0; ctx.Err() == nil; i++ {
				msg := fmt.Sprintf("worker %d call %d", w, i)
				callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				res, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
				cancel()
				calls.Add(1)
				if v, detail := classifyTool(res, err, "echo: "+msg); v != Allowed {
					fail(fmt.Sprintf("%s: %s", v, detail))
				}
			}
		}()
	}
	wg.Wait()
	return LoadResult{Calls: calls.Load(), Failures: failures.Load(), FirstErrors: firstErrs}
}

// Print writes one line per outcome and returns 0 when every step ended as
// expected, 1 otherwise.
func Print(w io.Writer, outcomes []Outcome) int {
	code := 0
	for _, o := range outcomes {
		mark := "ok  "
		if !o.OK() {
			mark = "FAIL"
			code = 1
		}
		fmt.Fprintf(w, "%s %-16s %-44s %-9s %s\n", mark, o.Method, o.Step, o.Verdict, o.Detail)
		if !o.OK() {
			fmt.Fprintf(w, "     expected %s\n", o.Want)
		}
	}
	return code
}
