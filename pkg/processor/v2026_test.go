package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/internal/mcpecho"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpheaders"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

const v26 = "2026-07-28"

// policyPlugin redacts transfer's account, blocks echo "block me", and
// rewrites secret in results.
func policyPlugin() *plugintest.Scripted {
	p := plugintest.NewScripted("words")
	post := rewriteWords(secret)
	p.SetFunc(func(ctx context.Context, h cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		if h != cpex.ToolPreInvoke {
			return post(ctx, h, payload, pctx)
		}
		var m map[string]json.RawMessage
		var args map[string]any
		if err := json.Unmarshal(payload, &m); err != nil {
			return nil, err
		}
		_ = json.Unmarshal(m["args"], &args)
		switch {
		case string(m["name"]) == `"`+mcpecho.TransferTool+`"`:
			args["account"] = "[REDACTED]"
			m["args"], _ = json.Marshal(args)
			return pluginserver.Modify("", m)
		case args["message"] == "block me":
			return plugintest.Block(cpex.PluginViolation{Reason: "Denied", Description: "blocked word", Code: "X"})(ctx, h, payload, pctx)
		}
		return nil, nil
	})
	return p
}

// TestStateless2026GoClient: the Go SDK v1.8.0 client speaking 2026-07-28
// to a stateless server through the sidecar: allowed, blocked, post-hooked,
// and a redacted argument mirrored in Mcp-Param-Account — the call succeeds
// and the server sees only the redacted value, in body and header.
func TestStateless2026GoClient(t *testing.T) {
	h := newHarness(t, wordsConfig, policyPlugin())
	endpoint := h.front(mcpecho.StatelessHandler())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != v26 {
		t.Fatalf("negotiated %q", v)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil { // the client learns x-mcp-header
		t.Fatal(err)
	}
	text := func(args map[string]any, name string) (string, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return "", err
		}
		return res.Content[0].(*mcp.TextContent).Text, nil
	}
	if got, err := text(map[string]any{"message": "hi"}, "echo"); err != nil || got != "echo: hi" {
		t.Errorf("allowed call: %q, %v", got, err)
	}
	if got, err := text(map[string]any{"message": "block me"}, "echo"); err == nil || !strings.Contains(err.Error(), "blocked word") {
		t.Errorf("blocked call: %q, %v", got, err)
	}
	if got, err := text(map[string]any{"message": "a secret"}, "echo"); err != nil || got != "echo: a "+rewritten {
		t.Errorf("post-hooked call: %q, %v", got, err)
	}
	got, err := text(map[string]any{"account": "acme-42", "amount": 5}, mcpecho.TransferTool)
	if want := "transfer 5 from [REDACTED] (header [REDACTED])"; err != nil || got != want {
		t.Errorf("redacted transfer: %q, %v; want %q", got, err, want)
	}
}

// TestHeaderMismatchRefused: a 2026-07-28 request whose Mcp-Name (or
// Mcp-Method) disagrees with its body is refused by the sidecar itself:
// HTTP 400, JSON-RPC -32020 with the request's id, nothing upstream.
//
// The Mcp-Method check needs the body to be read: with
// trust_mcp_method_header on (the default), a request whose Mcp-Method names
// a method no hook has is not read at all and the server refuses the
// mismatch (TestDecideHeaderSaysNoHookButBodyDoes), so this test turns it off.
func TestHeaderMismatchRefused(t *testing.T) {
	h := newHarness(t, wordsConfig+"extproc:\n  trust_mcp_method_header: false\n", policyPlugin())
	body := `{"jsonrpc":"2.0","id":"m-1","method":"tools/call","params":{"name":"transfer","arguments":{"account":"a"}}}`
	for _, kv := range [][]string{
		{"Mcp-Method", "tools/call", "Mcp-Name", "echo"},
		{"Mcp-Method", "tools/list", "Mcp-Name", "transfer"},
		{"Mcp-Method", "tools/call"}, // Mcp-Name missing while 2026-07-28 is declared
	} {
		res := h.do(mcpPost(body, append([]string{"Mcp-Protocol-Version", v26}, kv...)...), noUpstream(t))
		var r rpcResponse
		if err := json.Unmarshal(res.Body, &r); err != nil || res.Status != http.StatusBadRequest || r.Error == nil ||
			r.Error.Code != mcpheaders.CodeHeaderMismatch || string(r.ID) != `"m-1"` {
			t.Errorf("%v: %d %s", kv, res.Status, res.Body)
		}
	}
	// Agreeing headers pass (the upstream answers).
	res := h.do(mcpPost(body, "Mcp-Protocol-Version", v26, "Mcp-Method", "tools/call", "Mcp-Name", "transfer", mcpecho.AccountHeader, "a"), echoIDUpstream)
	if res.Status != http.StatusOK {
		t.Errorf("agreeing headers: %d %s", res.Status, res.Body)
	}
	if got := res.UpstreamRequest.Headers.Get(mcpecho.AccountHeader); got != "[REDACTED]" {
		t.Errorf("upstream %s = %q, want the redacted value", mcpecho.AccountHeader, got)
	}
}

// TestTasks: a task's result gets tool_post_invoke under the tool's name —
// read with tasks/result (2025-11-25) or in a completed tasks/get
// (2026-07-28 tasks extension); a task the sidecar never saw created is
// refused; pre hooks run on the task-augmented call.
func TestTasks(t *testing.T) {
	words := policyPlugin()
	h := newHarness(t, wordsConfig, words)
	tasks := &mcpecho.TaskServer{PollsToComplete: 1}
	endpoint := h.front(tasks)

	init := rpcDo(t, endpoint, http.MethodPost, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
	s := map[string]string{"Mcp-Session-Id": init.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": v25}
	created := responsesOf(t, rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"research","arguments":{"topic":"secret"},"task":{"ttl":60000}}}`, nil))["2"]
	var ct struct{ Task struct{ TaskID string } }
	if err := json.Unmarshal(created.Result, &ct); err != nil || ct.Task.TaskID == "" {
		t.Fatalf("CreateTaskResult %s", created.Result)
	}
	pre := 0
	for _, c := range words.Calls() {
		if c.Hook == cpex.ToolPreInvoke {
			pre++
		}
	}
	if pre != 1 {
		t.Errorf("%d tool_pre_invoke calls on the task-augmented call, want 1", pre)
	}
	get := fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":%q}}`, ct.Task.TaskID)
	if r := responsesOf(t, rpcDo(t, endpoint, http.MethodPost, s, get, nil))["3"]; !strings.Contains(string(r.Result), "working") {
		t.Fatalf("tasks/get %s", r.Result)
	}
	res := rpcDo(t, endpoint, http.MethodPost, s, fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":%q}}`, ct.Task.TaskID), nil)
	mustRewritten(t, "tasks/result", res, "4")

	// A task created behind the sidecar's back: its result is refused.
	direct := httpPostDirect(t, tasks, s, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"research","arguments":{"topic":"secret"},"task":{"ttl":60000}}}`)
	res = rpcDo(t, endpoint, http.MethodPost, s, fmt.Sprintf(`{"jsonrpc":"2.0","id":6,"method":"tasks/result","params":{"taskId":%q}}`, direct), nil)
	if r := responsesOf(t, res)["6"]; r.Error == nil || strings.Contains(string(res.Body), secret) {
		t.Errorf("unknown task's result: %s", res.Body)
	}
	if r := responsesOf(t, rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"research","arguments":{"topic":"bees"}}}`, nil))["7"]; !strings.Contains(string(r.Result), "report on bees") {
		t.Errorf("benign call after: %s", r.Result)
	}

	// 2026-07-28: the server makes a task; the result is in tasks/get.
	h26 := map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "tools/call", "Mcp-Name": mcpecho.TaskTool}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	c26 := responsesOf(t, rpcDo(t, endpoint, http.MethodPost, h26, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"research","arguments":{"topic":"secret"},`+meta+`}}`, nil))["1"]
	var t26 struct{ TaskID string }
	if err := json.Unmarshal(c26.Result, &t26); err != nil || t26.TaskID == "" {
		t.Fatalf("2026 CreateTaskResult %s", c26.Result)
	}
	h26 = map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "tasks/get"}
	get26 := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":%q}}`, t26.TaskID)
	if r := responsesOf(t, rpcDo(t, endpoint, http.MethodPost, h26, get26, nil))["2"]; !strings.Contains(string(r.Result), "working") {
		t.Fatalf("2026 tasks/get working: %s", r.Result)
	}
	done := rpcDo(t, endpoint, http.MethodPost, h26, get26, nil)
	mustRewritten(t, "2026 tasks/get completed", done, "2")
	if r := responsesOf(t, done)["2"]; !strings.Contains(string(r.Result), `"status":"completed"`) {
		t.Errorf("2026 tasks/get lost its status: %s", r.Result)
	}
}

// httpPostDirect posts body to srv without the sidecar and returns the
// created task's id.
func httpPostDirect(t *testing.T, srv http.Handler, header map[string]string, body string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	var r struct {
		Result struct{ Task struct{ TaskID string } }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.Result.Task.TaskID == "" {
		t.Fatalf("direct task: %s", rec.Body.Bytes())
	}
	return r.Result.Task.TaskID
}
