package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// The request path.

// oneGuard is a config with one plugin, "guard", failing closed.
const oneGuard = `
plugins:
  - name: guard
    kind: external
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
`

const echoCall = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}`

func TestRequestAllowedIsForwardedByteForByte(t *testing.T) {
	guard := plugintest.NewScripted("guard")
	h := newHarness(t, oneGuard, guard)
	// Odd spacing and key order: any re-encoding would show.
	bodies := map[string]string{
		"tools/call":     "{ \"params\" : {\"arguments\":{\"message\":\"h\\u00e9llo\"} ,\"name\":\"echo\",\"_meta\":{\"progressToken\":\"p-1\"}},\n\"method\":\"tools/call\",\"id\":\"a-1\",\"jsonrpc\":\"2.0\"}\n",
		"prompts/get":    `{"jsonrpc":"2.0","id":9,"method":"prompts/get","params":{"name":"args-prompt","arguments":{"city":"Paris","state":"IDF"}}}`,
		"resources/read": `{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"uri":"demo://resource/static/document/architecture.md"}}`,
		"tools/list":     `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		"notification":   `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
	wantHook := map[string]cpex.HookType{
		"tools/call":     cpex.ToolPreInvoke,
		"prompts/get":    cpex.PromptPreFetch,
		"resources/read": cpex.ResourcePreFetch,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			guard.Reset()
			res := doWith(t, &h.filter, mcpPost(body), echoIDUpstream)
			if res.UpstreamRequest == nil {
				t.Fatal("request did not reach the upstream")
			}
			if got := string(res.UpstreamRequest.Body); got != body {
				t.Errorf("upstream got\n%q\nwant\n%q", got, body)
			}
			if got := res.UpstreamRequest.Headers.Get("Content-Length"); got != strconv.Itoa(len(body)) {
				t.Errorf("content-length %q, want %d", got, len(body))
			}
			for i, r := range res.Received {
				if bodyMutation(r) != nil {
					t.Errorf("reply %d mutates the body of an allowed message: %v", i, r)
				}
			}
			calls := guard.Calls()
			hook, hooked := wantHook[name]
			if !hooked {
				if len(calls) != 0 {
					t.Errorf("plugin called for %s: %v", name, calls)
				}
				return
			}
			if len(calls) == 0 || calls[0].Hook != hook {
				t.Fatalf("plugin calls %v, want %s first", calls, hook)
			}
		})
	}
}

func TestRequestPreHookPayloads(t *testing.T) {
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke, cpex.PromptPreFetch, cpex.ResourcePreFetch)
	h := newHarness(t, oneGuard, guard)
	tests := []struct {
		body string
		hook cpex.HookType
		want string
	}{
		{echoCall, cpex.ToolPreInvoke, `{"name":"echo","args":{"message":"hello"}}`},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get-env"}}`, cpex.ToolPreInvoke, `{"name":"get-env","args":{}}`},
		{`{"jsonrpc":"2.0","id":9,"method":"prompts/get","params":{"name":"args-prompt","arguments":{"city":"Paris"}}}`, cpex.PromptPreFetch, `{"prompt_id":"args-prompt","args":{"city":"Paris"}}`},
		{`{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"uri":"demo://r/1"}}`, cpex.ResourcePreFetch, `{"uri":"demo://r/1","metadata":{}}`},
	}
	for _, tt := range tests {
		guard.Reset()
		h.do(mcpPost(tt.body), jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":1,"result":{}}`))
		calls := guard.Calls()
		if len(calls) != 1 || calls[0].Hook != tt.hook {
			t.Errorf("%s: calls %v, want one %s", tt.body, calls, tt.hook)
			continue
		}
		if !jsonEqual(t, calls[0].Payload, []byte(tt.want)) {
			t.Errorf("%s: payload %s, want %s", tt.body, calls[0].Payload, tt.want)
		}
	}
}

func intp(v int) *int { return &v }

func TestRequestBlocked(t *testing.T) {
	guard := plugintest.NewScripted("guard")
	h := newHarness(t, oneGuard, guard)
	tests := []struct {
		name       string
		body       string
		violation  cpex.PluginViolation
		wantStatus int
		wantBody   string
		wantHeader map[string]string
	}{{
		name:       "tools/call, defaults",
		body:       echoCall,
		violation:  cpex.PluginViolation{Reason: "Denied", Description: "echo is not allowed", Code: "DENY", Details: map[string]any{"rule": "no-echo"}},
		wantStatus: http.StatusOK,
		wantBody:   `{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"Denied: echo is not allowed","data":{"plugin":"guard","code":"DENY","details":{"rule":"no-echo"}}}}`,
	}, {
		name:       "string id, plugin's codes and headers",
		body:       `{"jsonrpc":"2.0","id":"req-7","method":"tools/call","params":{"name":"get-env","arguments":{}}}`,
		violation:  cpex.PluginViolation{Reason: "Forbidden", Description: "no env", Code: "ENV", MCPErrorCode: intp(-32001), HTTPStatusCode: intp(403), HTTPHeaders: map[string]string{"x-policy": "env"}},
		wantStatus: http.StatusForbidden,
		wantBody:   `{"jsonrpc":"2.0","id":"req-7","error":{"code":-32001,"message":"Forbidden: no env","data":{"plugin":"guard","code":"ENV","details":null}}}`,
		wantHeader: map[string]string{"x-policy": "env"},
	}, {
		name:       "prompts/get",
		body:       `{"jsonrpc":"2.0","id":9,"method":"prompts/get","params":{"name":"args-prompt","arguments":{"city":"Paris"}}}`,
		violation:  cpex.PluginViolation{Reason: "Denied", Description: "prompt", Code: "P"},
		wantStatus: http.StatusOK,
		wantBody:   `{"jsonrpc":"2.0","id":9,"error":{"code":-32000,"message":"Denied: prompt","data":{"plugin":"guard","code":"P","details":null}}}`,
	}, {
		name:       "resources/read",
		body:       `{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"uri":"file:///etc/passwd"}}`,
		violation:  cpex.PluginViolation{Reason: "Denied", Description: "resource", Code: "R"},
		wantStatus: http.StatusOK,
		wantBody:   `{"jsonrpc":"2.0","id":10,"error":{"code":-32000,"message":"Denied: resource","data":{"plugin":"guard","code":"R","details":null}}}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			guard.SetFunc(plugintest.Block(tt.violation))
			res := doWith(t, &h.filter, mcpPost(tt.body), noUpstream(t))
			if !res.Immediate {
				t.Fatal("not answered with an immediate response")
			}
			if res.Status != tt.wantStatus {
				t.Errorf("status %d, want %d", res.Status, tt.wantStatus)
			}
			if ct := res.Headers.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content-type %q", ct)
			}
			if d := res.Headers.Get("X-Mcp-Denied"); d != "true" {
				t.Errorf("x-mcp-denied %q", d)
			}
			for k, v := range tt.wantHeader {
				if got := res.Headers.Get(k); got != v {
					t.Errorf("header %s %q, want %q", k, got, v)
				}
			}
			if !jsonEqual(t, res.Body, []byte(tt.wantBody)) {
				t.Errorf("body\n%s\nwant\n%s", res.Body, tt.wantBody)
			}
			// The id is echoed with its exact JSON type.
			var env struct{ ID json.RawMessage }
			_ = json.Unmarshal(res.Body, &env)
			var want struct{ ID json.RawMessage }
			_ = json.Unmarshal([]byte(tt.body), &want)
			if string(env.ID) != string(want.ID) {
				t.Errorf("id %s, want %s", env.ID, want.ID)
			}
		})
	}
}

func TestRequestModified(t *testing.T) {
	guard := plugintest.NewScripted("guard")
	h := newHarness(t, oneGuard, guard)
	tests := []struct {
		name     string
		body     string
		script   pluginserver.HookFunc
		wantBody string
		header   [2]string // a header the upstream must get
		absent   []string  // headers the upstream must not get
	}{{
		name:     "tool arguments",
		body:     `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"mail bob@example.com"},"_meta":{"progressToken":"p-3"}}}`,
		script:   plugintest.Replace(map[string]any{"name": "echo", "args": map[string]any{"message": "mail [REDACTED]"}}),
		wantBody: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"mail [REDACTED]"},"_meta":{"progressToken":"p-3"}}}`,
	}, {
		name:     "tool name and a header",
		body:     echoCall,
		script:   plugintest.Replace(map[string]any{"name": "safe-echo", "args": map[string]any{"message": "hello"}, "headers": map[string]string{"X-Guard": "checked"}}),
		wantBody: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"safe-echo","arguments":{"message":"hello"}}}`,
		header:   [2]string{"X-Guard", "checked"},
	}, {
		// The header policy (hookfamily.MaySetHeader): a pre hook sets no
		// framing, encoding or MCP protocol header, and no credential the
		// client sent.
		name: "headers no plugin may set",
		body: echoCall,
		script: plugintest.Replace(map[string]any{"name": "echo", "args": map[string]any{"message": "hi"}, "headers": map[string]string{
			"Content-Encoding": "gzip", "Mcp-Session-Id": "another", "Mcp-Method": "ping", "X-Envoy-Foo": "1", "X-Guard": "checked"}}),
		wantBody: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`,
		header:   [2]string{"X-Guard", "checked"},
		absent:   []string{"Content-Encoding", "Mcp-Session-Id", "Mcp-Method", "X-Envoy-Foo"},
	}, {
		name:     "prompt arguments",
		body:     `{"jsonrpc":"2.0","id":9,"method":"prompts/get","params":{"name":"args-prompt","arguments":{"city":"Paris"}}}`,
		script:   plugintest.Replace(map[string]any{"prompt_id": "args-prompt", "args": map[string]string{"city": "Lyon", "state": "ARA"}}),
		wantBody: `{"jsonrpc":"2.0","id":9,"method":"prompts/get","params":{"name":"args-prompt","arguments":{"city":"Lyon","state":"ARA"}}}`,
	}, {
		name:     "resource uri",
		body:     `{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"uri":"demo://a"}}`,
		script:   plugintest.Replace(map[string]any{"uri": "demo://b", "metadata": map[string]any{}}),
		wantBody: `{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"uri":"demo://b"}}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			guard.SetFunc(tt.script)
			res := doWith(t, &h.filter, mcpPost(tt.body), jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{}}`))
			up := res.UpstreamRequest
			if up == nil {
				t.Fatal("request did not reach the upstream")
			}
			if string(up.Body) != tt.wantBody {
				t.Errorf("upstream got\n%s\nwant\n%s", up.Body, tt.wantBody)
			}
			// The fake already fails a length mismatch; say it plainly too.
			if cl := up.Headers.Get("Content-Length"); cl != strconv.Itoa(len(up.Body)) {
				t.Errorf("content-length %s for %d bytes", cl, len(up.Body))
			}
			if tt.header[0] != "" {
				if got := up.Headers.Get(tt.header[0]); got != tt.header[1] {
					t.Errorf("header %s %q, want %q", tt.header[0], got, tt.header[1])
				}
			}
			for _, k := range tt.absent {
				if got, ok := up.Headers[k]; ok {
					t.Errorf("header %s %q reached the upstream", k, got)
				}
			}
		})
	}
}

// TestRequestBatch covers the documented all-or-nothing choice for batches
// (request.go refuse): one refused element refuses the whole batch, the refused
// element gets its error and every other request an error saying it was not
// executed; an allowed batch is forwarded with only the modified element
// rewritten.
func TestRequestBatch(t *testing.T) {
	guard := plugintest.NewScripted("guard")
	guard.SetFunc(func(_ context.Context, hook cpex.HookType, p json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		var pl cpex.ToolPreInvokePayload
		if err := json.Unmarshal(p, &pl); err != nil || hook != cpex.ToolPreInvoke {
			return nil, err
		}
		switch pl.Name {
		case "rm":
			return pluginserver.Block("", cpex.PluginViolation{Reason: "Denied", Description: "rm", Code: "RM"}), nil
		case "echo":
			return pluginserver.Modify("", map[string]any{"name": "echo", "args": map[string]string{"message": "changed"}})
		}
		return nil, nil
	})
	h := newHarness(t, oneGuard, guard)

	t.Run("one element refused", func(t *testing.T) {
		body := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":1,"b":2}}},` +
			`{"jsonrpc":"2.0","id":"two","method":"tools/call","params":{"name":"rm","arguments":{}}},` +
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}},` +
			`{"jsonrpc":"2.0","id":3,"method":"tools/list"}]`
		res := doWith(t, &h.filter, mcpPost(body), noUpstream(t))
		if !res.Immediate || res.Status != http.StatusOK {
			t.Fatalf("immediate %v status %d, want an immediate 200", res.Immediate, res.Status)
		}
		if d := res.Headers.Get("X-Mcp-Denied"); d != "true" {
			t.Errorf("x-mcp-denied %q", d)
		}
		want := `[{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"not executed: another request in this batch was refused","data":{"refused_id":"two"}}},` +
			`{"jsonrpc":"2.0","id":"two","error":{"code":-32000,"message":"Denied: rm","data":{"plugin":"guard","code":"RM","details":null}}},` +
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"not executed: another request in this batch was refused","data":{"refused_id":"two"}}}]`
		if !jsonEqual(t, res.Body, []byte(want)) {
			t.Errorf("body\n%s\nwant\n%s", res.Body, want)
		}
	})

	t.Run("one element modified", func(t *testing.T) {
		other := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":1,"b":2}}}`
		list := `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
		body := "[" + other + ",\n " + echoCall + " , " + list + "]"
		res := doWith(t, &h.filter, mcpPost(body), jsonUpstream(http.StatusOK, `[]`))
		if res.UpstreamRequest == nil {
			t.Fatal("batch not forwarded")
		}
		want := "[" + other + ",\n " + `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"changed"}}}` + " , " + list + "]"
		if got := string(res.UpstreamRequest.Body); got != want {
			t.Errorf("upstream got\n%s\nwant\n%s", got, want)
		}
	})
}

// echoIDUpstream answers a JSON-RPC request with an empty result for its id.
func echoIDUpstream(ctx context.Context, r *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(r.Body, &m) != nil || m.ID == nil {
		return &envoytest.UpstreamResponse{Status: http.StatusAccepted}, nil
	}
	return jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{}}`)(ctx, r)
}

// TestRequestSkipped: what cannot carry a hooked MCP message costs one
// message and no body round trip. (GET streams: TestGETStreamCost.)
func TestRequestSkipped(t *testing.T) {
	guard := plugintest.NewScripted("guard")
	guard.SetFunc(plugintest.Block(cpex.PluginViolation{Reason: "Denied", Code: "X"}))
	h := newHarness(t, oneGuard, guard)
	post := func(path string) *envoytest.Request {
		r := mcpPost(echoCall)
		r.Path = path
		return r
	}
	tests := []struct {
		name string
		req  *envoytest.Request
	}{
		{"POST to another path", post("/api/v1/echo")},
		{"POST to a path that only starts like /mcp", post("/mcp2")},
		{"DELETE /mcp", &envoytest.Request{Method: http.MethodDelete, Path: "/mcp", Headers: http.Header{"Mcp-Session-Id": {"s-1"}}}},
		{"POST /mcp without body", &envoytest.Request{Method: http.MethodPost, Path: "/mcp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			guard.Reset()
			res := doWith(t, &h.filter, tt.req, jsonUpstream(http.StatusOK, echoCall))
			if got := kinds(res.Sent); strings.Join(got, ",") != "request_headers" {
				t.Errorf("Envoy sent %v, want only request_headers", got)
			}
			if res.UpstreamRequest == nil {
				t.Fatal("request did not reach the upstream")
			}
			if len(tt.req.Body) > 0 && string(res.UpstreamRequest.Body) != string(tt.req.Body[0]) {
				t.Errorf("upstream body %q", res.UpstreamRequest.Body)
			}
			if string(res.Body) != echoCall {
				t.Errorf("client got %q", res.Body)
			}
			if n := guard.CallCount(); n != 0 {
				t.Errorf("plugin called %d times", n)
			}
		})
	}
}

// TestRequestNotMCP: every body that is not a valid MCP message is answered
// once, with a JSON-RPC error, and never forwarded.
func TestRequestNotMCP(t *testing.T) {
	guard := plugintest.NewScripted("guard")
	h := newHarness(t, oneGuard, guard)
	tests := []struct {
		name string
		body [][]byte
		code int
	}{
		{"empty", [][]byte{{}}, -32700},
		{"not JSON", [][]byte{[]byte("hello")}, -32700},
		{"truncated JSON", [][]byte{[]byte(echoCall[:40])}, -32700},
		{"not UTF-8", [][]byte{[]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"e\xffcho\"}}")}, -32700},
		{"trailing data", [][]byte{[]byte(echoCall + echoCall)}, -32700},
		{"JSON, not JSON-RPC", [][]byte{[]byte(`{"hello":"world"}`)}, -32600},
		{"empty batch", [][]byte{[]byte(`[]`)}, -32600},
		{"duplicate keys", [][]byte{[]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"rm"}}`)}, -32600},
		{"tools/call without name", [][]byte{[]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`)}, -32602},
		{"tools/call as a notification", [][]byte{[]byte(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}`)}, -32600},
		{"in two chunks, not JSON", [][]byte{[]byte(`{"jsonrpc":`), []byte(`nope}`)}, -32700},
		{"gzip-encoded", [][]byte{[]byte("\x1f\x8b\x08\x00")}, -32600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			guard.Reset()
			req := mcpPost("")
			req.Body = tt.body
			req.Headers.Del("Content-Length")
			wantStatus := http.StatusBadRequest
			if tt.name == "gzip-encoded" {
				req.Headers.Set("Content-Encoding", "gzip")
				wantStatus = http.StatusUnsupportedMediaType
			}
			res := doWith(t, &h.filter, req, noUpstream(t))
			if !res.Immediate {
				t.Fatalf("not refused; sent %v", kinds(res.Sent))
			}
			if res.Status != wantStatus {
				t.Errorf("status %d, want %d", res.Status, wantStatus)
			}
			if ct := res.Headers.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content-type %q", ct)
			}
			var env struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(res.Body, &env); err != nil {
				t.Fatalf("body is not JSON: %v: %q", err, res.Body)
			}
			if env.JSONRPC != "2.0" || env.Error.Code != tt.code || env.Error.Message == "" {
				t.Errorf("body %s, want a JSON-RPC error %d", res.Body, tt.code)
			}
			if n := guard.CallCount(); n != 0 {
				t.Errorf("plugin called %d times", n)
			}
		})
	}
}

// guardConfig is oneGuard with on_error and plugin_timeout set.
func guardConfig(onError string, timeout string) string {
	return fmt.Sprintf(`
plugins:
  - name: guard
    kind: external
    on_error: %s
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: %s
`, onError, timeout)
}

func TestRequestPluginFailure(t *testing.T) {
	hang := func(t *testing.T) pluginserver.HookFunc {
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		return plugintest.WaitFor(release, nil)
	}
	fail := func(*testing.T) pluginserver.HookFunc {
		return plugintest.Fail(cpex.PluginErrorModel{Message: "model unavailable", Code: "UPSTREAM"})
	}
	tests := []struct {
		name    string
		onError string
		script  func(*testing.T) pluginserver.HookFunc
		timeout string
	}{
		{"error reply, fail closed", "fail", fail, "5"},
		{"error reply, fail open", "ignore", fail, "5"},
		{"hanging plugin, fail closed", "fail", hang, "0.2"},
		{"hanging plugin, fail open", "ignore", hang, "0.2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			guard := plugintest.NewScripted("guard")
			guard.SetFunc(tt.script(t))
			h := newHarness(t, guardConfig(tt.onError, tt.timeout), guard)
			res := h.do(mcpPost(echoCall), jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`))
			if guard.CallCount() == 0 {
				t.Fatal("plugin never called")
			}
			if tt.onError == "ignore" {
				if res.UpstreamRequest == nil || string(res.UpstreamRequest.Body) != echoCall {
					t.Fatalf("fail open: request not forwarded unchanged (immediate %v, body %s)", res.Immediate, res.Body)
				}
				return
			}
			if !res.Immediate || res.Status != http.StatusOK || res.UpstreamRequest != nil {
				t.Fatalf("fail closed: immediate %v status %d upstream %v", res.Immediate, res.Status, res.UpstreamRequest != nil)
			}
			var env struct {
				ID    int `json:"id"`
				Error struct {
					Code    int            `json:"code"`
					Message string         `json:"message"`
					Data    map[string]any `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(res.Body, &env); err != nil {
				t.Fatal(err)
			}
			if env.ID != 3 || env.Error.Code != -32603 || !strings.Contains(env.Error.Message, "guard") || env.Error.Data["plugin"] != "guard" {
				t.Errorf("body %s, want error -32603 for id 3 naming the plugin guard", res.Body)
			}
			if d := res.Headers.Get("X-Mcp-Denied"); d != "true" {
				t.Errorf("x-mcp-denied %q", d)
			}
		})
	}
}

// suffix is a tool_pre_invoke script appending s to args.msg.
func suffix(s string) pluginserver.HookFunc {
	return func(_ context.Context, _ cpex.HookType, p json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		var pl struct {
			Name string `json:"name"`
			Args struct {
				Msg string `json:"msg"`
			} `json:"args"`
		}
		if err := json.Unmarshal(p, &pl); err != nil {
			return nil, err
		}
		return pluginserver.Modify("", map[string]any{"name": pl.Name, "args": map[string]string{"msg": pl.Args.Msg + s}})
	}
}

func TestRequestPriorityChain(t *testing.T) {
	// Listed in the reverse of their priority: the order comes from priority.
	yaml := `
plugins:
  - name: second
    kind: external
    priority: 20
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
  - name: first
    kind: external
    priority: 10
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
`
	first := plugintest.NewScripted("first", cpex.ToolPreInvoke)
	first.SetFunc(suffix("+first"))
	second := plugintest.NewScripted("second", cpex.ToolPreInvoke)
	second.SetFunc(suffix("+second"))
	h := newHarness(t, yaml, first, second)
	res := h.do(mcpPost(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","arguments":{"msg":"a"}}}`),
		jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":1,"result":{}}`))
	want := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","arguments":{"msg":"a+first+second"}}}`
	if res.UpstreamRequest == nil || string(res.UpstreamRequest.Body) != want {
		t.Fatalf("upstream got %s, want %s", res.UpstreamRequest.Body, want)
	}
	if c := second.Calls(); len(c) != 1 || !strings.Contains(string(c[0].Payload), `"a+first"`) {
		t.Errorf("second plugin saw %v, want the first one's payload", c)
	}
}

func TestRequestConditions(t *testing.T) {
	yaml := `
plugins:
  - name: guard
    kind: external
    conditions:
      - tools: [get-env]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
`
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
	guard.SetFunc(plugintest.Block(cpex.PluginViolation{Reason: "Denied", Description: "env", Code: "ENV"}))
	h := newHarness(t, yaml, guard)

	res := h.do(mcpPost(echoCall), jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{}}`))
	if res.Immediate || res.UpstreamRequest == nil {
		t.Errorf("echo: refused, but the plugin's conditions do not name it")
	}
	if n := guard.CallCount(); n != 0 {
		t.Errorf("plugin called %d times for a tool its conditions do not list", n)
	}
	res = h.do(mcpPost(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get-env"}}`), noUpstream(t))
	if !res.Immediate {
		t.Errorf("get-env not refused")
	}
	if n := guard.CallCount(); n != 1 {
		t.Errorf("plugin called %d times, want 1", n)
	}
}

func TestRequestContext(t *testing.T) {
	yaml := `
plugins:
  - name: guard
    kind: external
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
extproc:
  user_header: X-User
  tenant_header: x-tenant
  server_header: x-server
  forward_headers: [x-trace, mcp-protocol-version, mcp-session-id]
`
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
	h := newHarness(t, yaml, guard)
	plain := newHarness(t, oneGuard, guard)
	up := jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{}}`)
	creds := []string{"Authorization", "Bearer s3cret", "Cookie", "sid=s3cret", "Proxy-Authorization", "Basic s3cret"}

	t.Run("from headers", func(t *testing.T) {
		guard.Reset()
		h.do(mcpPost(echoCall, append([]string{"X-Request-Id", "req-42", "Mcp-Session-Id", "sess-1", "X-User", "alice@example.com",
			"X-Tenant", "acme", "X-Server", "everything", "X-Trace", "t-9", "Mcp-Protocol-Version", "2025-06-18"}, creds...)...), up)
		calls := guard.Calls()
		if len(calls) != 1 {
			t.Fatalf("%d calls", len(calls))
		}
		g := calls[0].Context.GlobalContext
		if g.RequestID != "req-42" || string(g.User) != `"alice@example.com"` || g.TenantID != "acme" || g.ServerID != "everything" {
			t.Errorf("global context %+v", g)
		}
		if g.Metadata["mcp_session_id"] != "sess-1" {
			t.Errorf("global metadata %v, want mcp_session_id sess-1", g.Metadata)
		}
		var pl cpex.ToolPreInvokePayload
		if err := json.Unmarshal(calls[0].Payload, &pl); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"x-trace": "t-9", "mcp-protocol-version": "2025-06-18", "mcp-session-id": "sess-1"}
		if fmt.Sprint(pl.Headers) != fmt.Sprint(want) {
			t.Errorf("forwarded headers %v, want %v", pl.Headers, want)
		}
		if strings.Contains(string(calls[0].Payload), "s3cret") {
			t.Errorf("credentials reached the plugin: %s", calls[0].Payload)
		}
	})

	t.Run("defaults", func(t *testing.T) {
		guard.Reset()
		for range 2 {
			plain.do(mcpPost(echoCall, append([]string{"X-User", "alice", "X-Trace", "t-9"}, creds...)...), up)
		}
		calls := guard.Calls()
		if len(calls) != 2 {
			t.Fatalf("%d calls", len(calls))
		}
		a, b := calls[0].Context.GlobalContext, calls[1].Context.GlobalContext
		if a.RequestID == "" || a.RequestID == b.RequestID {
			t.Errorf("generated request ids %q and %q: want distinct, non-empty", a.RequestID, b.RequestID)
		}
		if a.User != nil || a.TenantID != "" || a.ServerID != "" {
			t.Errorf("user/tenant/server set without configured headers: %+v", a)
		}
		if strings.Contains(string(calls[0].Payload), `"headers"`) {
			t.Errorf("headers forwarded by default: %s", calls[0].Payload)
		}
	})
}

func TestRequestTooLarge(t *testing.T) {
	yaml := oneGuard + `
extproc:
  max_body_bytes: 200
`
	guard := plugintest.NewScripted("guard")
	h := newHarness(t, yaml, guard)
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + strings.Repeat("x", 200) + `"}}}`
	res := h.do(mcpPost(body), noUpstream(t))
	if !res.Immediate || res.Status != http.StatusRequestEntityTooLarge || !strings.Contains(string(res.Body), `"code":-32600`) {
		t.Errorf("immediate %v status %d body %s, want a 413 JSON-RPC error", res.Immediate, res.Status, res.Body)
	}
	if n := guard.CallCount(); n != 0 {
		t.Errorf("plugin called %d times", n)
	}
}

// TestEnvoyIgnoresModeOverride: with allow_mode_override false Envoy never
// sends the request body, so no pre hook ran; the processor must not let the
// answer through as if it had been checked.
func TestEnvoyIgnoresModeOverride(t *testing.T) {
	guard := plugintest.NewScripted("guard")
	h := newHarness(t, oneGuard, guard)
	f := h.filter
	f.AllowModeOverride = false
	res := doWith(t, &f, mcpPost(echoCall), jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`))
	if !res.Immediate || res.Status != http.StatusInternalServerError || strings.Contains(string(res.Body), "result") {
		t.Errorf("immediate %v status %d body %s, want a 500 JSON-RPC error", res.Immediate, res.Status, res.Body)
	}
}
