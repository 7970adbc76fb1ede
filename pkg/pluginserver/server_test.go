package pluginserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every blocking call of a test.
const testTimeout = 10 * time.Second

func ptr[T any](v T) *T { return &v }

// serve starts srv on a loopback listener and connects a go-sdk client.
func serve(t *testing.T, srv *pluginserver.Server) *mcp.ClientSession {
	t.Helper()
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
		ts.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callJSON calls a tool and decodes the one text block it returns.
func callJSON(t *testing.T, cs *mcp.ClientSession, tool string, args any, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	if res.IsError {
		t.Fatalf("call %s: error result %+v", tool, res.Content)
	}
	if res.StructuredContent != nil {
		t.Errorf("call %s: structuredContent %v, want none", tool, res.StructuredContent)
	}
	if len(res.Content) != 1 {
		t.Fatalf("call %s: %d content blocks, want 1", tool, len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("call %s: content is %T, want *mcp.TextContent", tool, res.Content[0])
	}
	if err := json.Unmarshal([]byte(tc.Text), out); err != nil {
		t.Fatalf("call %s: decode %q: %v", tool, tc.Text, err)
	}
}

var (
	denyCfg = pluginserver.Config{
		Name:     "DenyList",
		Hooks:    []cpex.HookType{cpex.ToolPreInvoke},
		Priority: ptr(10),
		Tags:     []string{"security"},
	}
	piiCfg = pluginserver.Config{
		Name:  "PIIFilter",
		Hooks: []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke},
		Mode:  "transform",
	}
)

func TestGetPluginConfigs(t *testing.T) {
	cs := serve(t, pluginserver.New(pluginserver.Func(denyCfg, nil), pluginserver.Func(piiCfg, nil)))
	var got []map[string]any
	callJSON(t, cs, cpex.ToolGetPluginConfigs, map[string]any{}, &got)
	want := []map[string]any{
		{"name": "DenyList", "kind": "external", "mode": "sequential", "priority": 10.0,
			"hooks": []any{"tool_pre_invoke"}, "tags": []any{"security"}, "conditions": []any{}},
		{"name": "PIIFilter", "kind": "external", "mode": "transform", "priority": 100.0,
			"hooks": []any{"tool_pre_invoke", "tool_post_invoke"}, "tags": []any{}, "conditions": []any{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("get_plugin_configs (-want +got):\n%s", diff)
	}
}

func TestGetPluginConfig(t *testing.T) {
	cs := serve(t, pluginserver.New(pluginserver.Func(denyCfg, nil), pluginserver.Func(piiCfg, nil)))
	tests := []struct {
		name     string
		args     any
		wantName any // nil: want {}
	}{
		{"exact", map[string]any{"name": "DenyList"}, "DenyList"},
		{"lower case", map[string]any{"name": "denylist"}, "DenyList"},
		{"upper case", map[string]any{"name": "PIIFILTER"}, "PIIFilter"},
		{"unknown", map[string]any{"name": "nope"}, nil},
		{"empty name", map[string]any{"name": ""}, nil},
		{"no name", map[string]any{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got map[string]any
			callJSON(t, cs, cpex.ToolGetPluginConfig, tt.args, &got)
			if tt.wantName == nil {
				if len(got) != 0 {
					t.Errorf("got %v, want {}", got)
				}
				return
			}
			if got["name"] != tt.wantName {
				t.Errorf("name = %v, want %v (config %v)", got["name"], tt.wantName, got)
			}
		})
	}
}

func TestInvokeHook(t *testing.T) {
	tests := []struct {
		name string
		args map[string]any
		// plugin behaviour (nil: continue)
		fn   pluginserver.HookFunc
		want cpex.InvokeHookReply
	}{
		{
			name: "nil reply continues",
			fn: func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
				return nil, nil
			},
			want: cpex.InvokeHookReply{PluginName: "DenyList", Result: &cpex.PluginResult{ContinueProcessing: ptr(true)}},
		},
		{
			name: "modify",
			fn: func(_ context.Context, _ cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
				var p cpex.ToolPreInvokePayload
				if err := json.Unmarshal(payload, &p); err != nil {
					return nil, err
				}
				p.Args = json.RawMessage(`{"q":"[REDACTED]"}`)
				return pluginserver.Modify("", p)
			},
			want: cpex.InvokeHookReply{PluginName: "DenyList", Result: &cpex.PluginResult{
				ContinueProcessing: ptr(true),
				ModifiedPayload:    json.RawMessage(`{"name":"search","args":{"q":"[REDACTED]"}}`),
			}},
		},
		{
			name: "block",
			fn: func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
				return pluginserver.Block("DenyList", cpex.PluginViolation{Reason: "denied", Description: "d", Code: "DENY"}), nil
			},
			want: cpex.InvokeHookReply{PluginName: "DenyList", Result: &cpex.PluginResult{
				ContinueProcessing: ptr(false),
				Violation:          &cpex.PluginViolation{Reason: "denied", Description: "d", Code: "DENY", PluginName: "DenyList"},
			}},
		},
		{
			name: "violation plugin name filled in",
			fn: func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
				return pluginserver.Block("", cpex.PluginViolation{Reason: "r", Code: "C"}), nil
			},
			want: cpex.InvokeHookReply{PluginName: "DenyList", Result: &cpex.PluginResult{
				ContinueProcessing: ptr(false),
				Violation:          &cpex.PluginViolation{Reason: "r", Code: "C", PluginName: "DenyList"},
			}},
		},
		{
			name: "context returned",
			fn: func(_ context.Context, _ cpex.HookType, _ json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
				pctx.State["seen"] = true
				r := pluginserver.Continue("DenyList")
				r.Context = pctx
				return r, nil
			},
			want: cpex.InvokeHookReply{PluginName: "DenyList", Result: &cpex.PluginResult{ContinueProcessing: ptr(true)},
				Context: &cpex.PluginContext{State: map[string]any{"seen": true}, Metadata: map[string]any{},
					GlobalContext: cpex.GlobalContext{RequestID: "req-1", State: map[string]any{}, Metadata: map[string]any{}}}},
		},
		{
			name: "plain error",
			fn: func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
				return nil, fmt.Errorf("backend: %w", io.ErrUnexpectedEOF)
			},
			want: cpex.InvokeHookReply{PluginName: "DenyList", Error: &cpex.PluginErrorModel{
				Message: "backend: unexpected EOF", PluginName: "DenyList", Code: pluginserver.CodePluginError, MCPErrorCode: ptr(-32603)}},
		},
		{
			name: "typed error",
			fn: func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
				return nil, &pluginserver.Error{Model: cpex.PluginErrorModel{Message: "quota", Code: "QUOTA", MCPErrorCode: ptr(-32000)}}
			},
			want: cpex.InvokeHookReply{PluginName: "DenyList", Error: &cpex.PluginErrorModel{
				Message: "quota", PluginName: "DenyList", Code: "QUOTA", MCPErrorCode: ptr(-32000)}},
		},
		{
			name: "panic",
			fn: func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
				var m map[string]int
				m["boom"]++ // nil map write panics
				return nil, nil
			},
			want: cpex.InvokeHookReply{PluginName: "DenyList", Error: &cpex.PluginErrorModel{
				Message:    "plugin DenyList panicked in tool_pre_invoke: assignment to entry in nil map",
				PluginName: "DenyList", Code: pluginserver.CodePluginPanic, MCPErrorCode: ptr(-32603)}},
		},
		{
			name: "invalid reply passes through",
			fn: func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
				return &cpex.InvokeHookReply{}, nil
			},
			want: cpex.InvokeHookReply{PluginName: "DenyList"},
		},
		{
			name: "unknown plugin",
			args: map[string]any{"hook_type": "tool_pre_invoke", "plugin_name": "ghost", "payload": map[string]any{}, "context": map[string]any{}},
			want: cpex.InvokeHookReply{PluginName: "ghost", Error: &cpex.PluginErrorModel{
				Message: `unable to retrieve plugin "ghost" to execute`, PluginName: "ghost", Code: pluginserver.CodeUnknownPlugin, MCPErrorCode: ptr(-32603)}},
		},
		{
			name: "unknown hook",
			args: map[string]any{"hook_type": "tool_sideways", "plugin_name": "denylist", "payload": map[string]any{}, "context": map[string]any{}},
			want: cpex.InvokeHookReply{PluginName: "DenyList", Error: &cpex.PluginErrorModel{
				Message: `unknown hook type "tool_sideways"`, PluginName: "DenyList", Code: pluginserver.CodeUnknownHook, MCPErrorCode: ptr(-32603)}},
		},
		{
			name: "missing hook type",
			args: map[string]any{"plugin_name": "DenyList", "payload": map[string]any{}},
			want: cpex.InvokeHookReply{PluginName: "DenyList", Error: &cpex.PluginErrorModel{
				Message:    "invoke_hook: invalid arguments: hook_type and plugin_name are required",
				PluginName: "DenyList", Code: pluginserver.CodeInvalidArgs, MCPErrorCode: ptr(-32603)}},
		},
		{
			name: "context not an object",
			args: map[string]any{"hook_type": "tool_pre_invoke", "plugin_name": "DenyList", "payload": map[string]any{}, "context": "x"},
			want: cpex.InvokeHookReply{PluginName: "DenyList", Error: &cpex.PluginErrorModel{
				Message:    "invoke_hook: invalid arguments: json: cannot unmarshal string into Go struct field InvokeHookArgs.context of type cpex.PluginContext",
				PluginName: "DenyList", Code: pluginserver.CodeInvalidArgs, MCPErrorCode: ptr(-32603)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := tt.fn
			if fn == nil {
				fn = func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
					t.Error("plugin called, want no call")
					return nil, nil
				}
			}
			cs := serve(t, pluginserver.New(pluginserver.Func(denyCfg, fn)))
			args := tt.args
			if args == nil {
				args = map[string]any{
					"hook_type":   "tool_pre_invoke",
					"plugin_name": "DenyList",
					"payload":     map[string]any{"name": "search", "args": map[string]any{"q": "secret"}},
					"context":     map[string]any{"state": map[string]any{}, "metadata": map[string]any{}, "global_context": map[string]any{"request_id": "req-1"}},
				}
			}
			var got cpex.InvokeHookReply
			callJSON(t, cs, cpex.ToolInvokeHook, args, &got)
			if diff := cmp.Diff(tt.want, got, cmp.Transformer("raw", func(r json.RawMessage) string { return string(r) })); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInvokeHookSeesPayloadAndContext(t *testing.T) {
	type seen struct {
		hook    cpex.HookType
		payload string
		ctx     *cpex.PluginContext
	}
	got := make(chan seen, 1)
	cs := serve(t, pluginserver.New(pluginserver.Func(denyCfg, func(_ context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		got <- seen{hook, string(payload), pctx}
		return nil, nil
	})))
	var reply cpex.InvokeHookReply
	callJSON(t, cs, cpex.ToolInvokeHook, map[string]any{
		"hook_type":   "tool_post_invoke",
		"plugin_name": "DenyList",
		"payload":     json.RawMessage(`{"name":"echo","result":{"content":[{"type":"text","text":"hi"}]}}`),
		"context": map[string]any{"global_context": map[string]any{
			"request_id": "r-9", "user": map[string]any{"email": "a@b"}, "tenant_id": "t1", "state": map[string]any{"k": "v"}}},
	}, &reply)
	s := <-got
	if s.hook != cpex.ToolPostInvoke {
		t.Errorf("hook = %q", s.hook)
	}
	if s.payload != `{"name":"echo","result":{"content":[{"type":"text","text":"hi"}]}}` {
		t.Errorf("payload = %s", s.payload)
	}
	want := &cpex.PluginContext{State: map[string]any{}, Metadata: map[string]any{}, GlobalContext: cpex.GlobalContext{
		RequestID: "r-9", User: json.RawMessage(`{"email":"a@b"}`), TenantID: "t1",
		State: map[string]any{"k": "v"}, Metadata: map[string]any{}}}
	if diff := cmp.Diff(want, s.ctx, cmp.Transformer("raw", func(r json.RawMessage) string { return string(r) })); diff != "" {
		t.Errorf("context (-want +got):\n%s", diff)
	}
	if reply.Result == nil || !reply.Result.Continue() {
		t.Errorf("reply = %+v, want continue", reply)
	}
}

// post sends one raw JSON-RPC POST to the endpoint.
func post(t *testing.T, url, session, body string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}`

func TestHTTPEncoding(t *testing.T) {
	tests := []struct {
		name     string
		opts     *pluginserver.Options
		wantType string
	}{
		{"default answers SSE", nil, "text/event-stream"},
		{"JSONResponse answers JSON", &pluginserver.Options{JSONResponse: true}, "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := pluginserver.NewWithOptions(tt.opts, pluginserver.Func(denyCfg, nil))
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			defer srv.Close()
			resp := post(t, ts.URL, "", initBody)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType) {
				t.Errorf("Content-Type = %q, want %q", ct, tt.wantType)
			}
			sid := resp.Header.Get("Mcp-Session-Id")
			if sid == "" {
				t.Fatal("no Mcp-Session-Id: server is not stateful")
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(body, []byte(`"protocolVersion":"2025-06-18"`)) {
				t.Errorf("initialize answer %s", body)
			}
			// A request on an unknown session gets the go-sdk's 404.
			stale := post(t, ts.URL, "not-a-session", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			if stale.StatusCode != http.StatusNotFound {
				t.Errorf("unknown session: status %d, want 404", stale.StatusCode)
			}
		})
	}
}

func TestCloseCancelsRunningHooks(t *testing.T) {
	started := make(chan struct{})
	srv := pluginserver.New(pluginserver.Func(denyCfg, func(ctx context.Context, _ cpex.HookType, _ json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	h := srv.Handler()
	ts := httptest.NewServer(h)
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: cpex.ToolInvokeHook, Arguments: map[string]any{
			"hook_type": "tool_pre_invoke", "plugin_name": "DenyList", "payload": map[string]any{"name": "x"}, "context": map[string]any{}}})
		done <- result{res, err}
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("hook never started")
	}
	if err := h.(io.Closer).Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	select {
	case r := <-done:
		// The session is gone: the call either fails or carries the
		// cancellation reply; it must not hang.
		if r.err == nil && r.res != nil {
			var reply cpex.InvokeHookReply
			if err := json.Unmarshal([]byte(r.res.Content[0].(*mcp.TextContent).Text), &reply); err != nil || reply.Error == nil {
				t.Errorf("reply after close = %v (%v), want error reply", r.res.Content, err)
			}
		}
	case <-ctx.Done():
		t.Fatal("call hangs after Close")
	}
	// The closed endpoint refuses new work.
	resp := post(t, ts.URL, "", initBody)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("after close: status %d, want 503", resp.StatusCode)
	}
}

func TestHandlersAreIndependent(t *testing.T) {
	srv := pluginserver.New(pluginserver.Func(denyCfg, nil))
	defer srv.Close()
	a := httptest.NewServer(srv.Handler())
	defer a.Close()
	b := httptest.NewServer(srv.Handler())
	defer b.Close()
	sid := post(t, a.URL, "", initBody).Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("no session id")
	}
	if got := post(t, b.URL, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`).StatusCode; got != http.StatusNotFound {
		t.Errorf("session of handler A on handler B: status %d, want 404", got)
	}
}

func TestNewPanicsOnDuplicateNames(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New with duplicate names did not panic")
		}
	}()
	pluginserver.New(pluginserver.Func(denyCfg, nil), pluginserver.Func(pluginserver.Config{Name: "denylist"}, nil))
}

func TestErrorMessage(t *testing.T) {
	err := fmt.Errorf("wrap: %w", &pluginserver.Error{Model: cpex.PluginErrorModel{Message: "m", Code: "C"}})
	var pe *pluginserver.Error
	if !errors.As(err, &pe) || err.Error() != "wrap: C: m" {
		t.Errorf("err = %v", err)
	}
}

func TestStructuredContentOption(t *testing.T) {
	srv := pluginserver.NewWithOptions(&pluginserver.Options{StructuredContent: true}, pluginserver.Func(denyCfg, nil))
	cs := serve(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tests := []struct {
		tool string
		args any
		want string // structuredContent, re-marshalled
	}{
		{cpex.ToolGetPluginConfig, map[string]any{"name": "nobody"}, `{}`},
		{cpex.ToolGetPluginConfigs, map[string]any{}, `{"result":[{"conditions":[],"hooks":["tool_pre_invoke"],"kind":"external","mode":"sequential","name":"DenyList","priority":10,"tags":["security"]}]}`},
	}
	for _, tt := range tests {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
		if err != nil {
			t.Fatalf("%s: %v", tt.tool, err)
		}
		got, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("%s: structuredContent %s, want %s", tt.tool, got, tt.want)
		}
		if len(res.Content) != 1 {
			t.Errorf("%s: %d content blocks, want 1", tt.tool, len(res.Content))
		}
	}
}
