package processor_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strconv"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// TestTraceContextReachesPlugin: the plugin server sees, as HTTP headers of
// the invoke_hook request, the traceparent, tracestate and x-request-id of
// the MCP request that caused the call, and the plugin context carries them.
func TestTraceContextReachesPlugin(t *testing.T) {
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
	h := newHarness(t, oneGuard, guard)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	h.do(mcpPost(echoCall, "Traceparent", tp, "Tracestate", "vendor=1", "X-Request-Id", "req-trace"),
		jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{}}`))

	req, ok := h.server.LastToolCall("invoke_hook")
	if !ok {
		t.Fatal("the plugin server saw no invoke_hook call")
	}
	for k, want := range map[string]string{"Traceparent": tp, "Tracestate": "vendor=1", "X-Request-Id": "req-trace"} {
		if got := req.Header.Get(k); got != want {
			t.Errorf("plugin request header %s = %q, want %q", k, got, want)
		}
	}
	calls := guard.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d calls", len(calls))
	}
	if got := calls[0].Context.GlobalContext.Metadata["traceparent"]; got != tp {
		t.Errorf("global_context.metadata.traceparent = %v, want %s", got, tp)
	}
}

// TestGzipRequestInspected: a gzip-encoded tools/call is decoded, seen by
// the plugin, and forwarded decoded (content-encoding removed,
// content-length right), so the server reads exactly what was inspected.
func TestGzipRequestInspected(t *testing.T) {
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
	h := newHarness(t, oneGuard, guard)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(echoCall))
	zw.Close()
	req := &envoytest.Request{Method: http.MethodPost, Path: "/mcp", Authority: "mcp.local", Scheme: "http",
		Headers: http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"},
			"Content-Length": {strconv.Itoa(buf.Len())}},
		Body: [][]byte{buf.Bytes()}}
	res := h.do(req, jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{}}`))
	if len(guard.Calls()) != 1 {
		t.Fatalf("plugin calls = %d, want 1: the gzip body was not inspected", len(guard.Calls()))
	}
	up := res.UpstreamRequest
	if up == nil {
		t.Fatalf("nothing reached upstream: %d %s", res.Status, res.Body)
	}
	if string(up.Body) != echoCall || up.Headers.Get("Content-Encoding") != "" {
		t.Errorf("upstream got %q with content-encoding %q; want the decoded body without it", up.Body, up.Headers.Get("Content-Encoding"))
	}

	// A body that does not match its encoding is refused, not forwarded.
	req.Body = [][]byte{[]byte(echoCall)}
	req.Headers.Set("Content-Length", strconv.Itoa(len(echoCall)))
	res = h.do(req, jsonUpstream(http.StatusOK, `{}`))
	if res.UpstreamRequest != nil || res.Status != http.StatusUnsupportedMediaType {
		t.Errorf("corrupt gzip: status %d, upstream reached %v; want 415 and nothing forwarded", res.Status, res.UpstreamRequest != nil)
	}
}
