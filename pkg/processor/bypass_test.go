package processor_test

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// TestBypassAttempts is the hardening table: for each crafted request
// carrying a tools/call, either the plugin saw the call, or the request was
// refused with a JSON-RPC error and nothing reached the server. A request
// that reached the server without the plugin seeing it is a bypass.
func TestBypassAttempts(t *testing.T) {
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
	h := newHarness(t, oneGuard+"extproc:\n  max_body_bytes: 65536\n", guard)
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.Bytes()
	}
	deflate := func(s string) []byte {
		var b bytes.Buffer
		w, _ := flate.NewWriter(&b, flate.BestSpeed)
		w.Write([]byte(s))
		w.Close()
		return b.Bytes()
	}
	const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"exec","arguments":{"cmd":"rm -rf /"}}}`
	tests := []struct {
		name    string
		body    []byte
		headers []string
		// seen: the plugin must see the call; otherwise the request must be
		// refused (status) without reaching the server.
		seen   bool
		status int
	}{
		{name: "plain call", body: []byte(call), seen: true},
		{name: "duplicate name", body: []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","name":"exec","arguments":{}}}`), status: 400},
		{name: "duplicate method", body: []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/list","method":"tools/call","params":{"name":"exec","arguments":{}}}`), status: 400},
		{name: "duplicate params", body: []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}},"params":{"name":"exec","arguments":{}}}`), status: 400},
		{name: "nested params duplicates", body: []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"exec","arguments":{"cmd":"ls","cmd":"rm -rf /"}}}`), status: 400},
		{name: "case-variant key", body: []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"exec","arguments":{},"ARGUMENTS":{"cmd":"rm"}}}`), status: 400},
		{name: "gzip body", body: gz(call), headers: []string{"Content-Encoding", "gzip"}, seen: true},
		{name: "deflate body", body: deflate(call), headers: []string{"Content-Encoding", "deflate"}, seen: true},
		{name: "unknown encoding", body: []byte(call), headers: []string{"Content-Encoding", "compress"}, status: 415},
		{name: "body with BOM", body: append([]byte("\xef\xbb\xbf"), call...), status: 400},
		{name: "content-type text/plain", body: []byte(call), headers: []string{"Content-Type", "text/plain"}, seen: true},
		{name: "no content-type", body: []byte(call), headers: []string{"Content-Type", ""}, seen: true},
		{name: "batch with the call second", body: []byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},` + call + `]`), seen: true},
		{name: "unicode-escaped method", body: []byte(`{"jsonrpc":"2.0","id":7,"method":"tools\u002fcall","params":{"name":"exec","arguments":{"cmd":"rm -rf /"}}}`), seen: true},
		{name: "escaped method name in key", body: []byte(`{"jsonrpc":"2.0","id":7,"m\u0065thod":"tools/call","params":{"name":"exec","arguments":{}}}`), seen: true},
		{name: "huge body", body: []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"exec","arguments":{"pad":"` + strings.Repeat("x", 70000) + `"}}}`), status: 413},
		{name: "gzip bomb", body: gz(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"exec","arguments":{"pad":"` + strings.Repeat("x", 1<<20) + `"}}}`), headers: []string{"Content-Encoding", "gzip"}, status: 413},
		{name: "truncated body", body: []byte(call[:len(call)-3]), status: 400},
		{name: "trailing garbage", body: []byte(call + `{"x":1}`), status: 400},
		{name: "not UTF-8", body: []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ex` + "\xff" + `ec","arguments":{}}}`), status: 400},
		{name: "empty batch", body: []byte(`[]`), status: 400},
		{name: "params not an object", body: []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"exec"}`), status: 400},
		{name: "name not a string", body: []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":["exec"],"arguments":{}}}`), status: 400},
		{name: "a JSON string body", body: []byte(`"tools/call"`), status: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			guard.Reset()
			hdr := http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(tt.body))}}
			for i := 0; i+1 < len(tt.headers); i += 2 {
				if tt.headers[i+1] == "" {
					hdr.Del(tt.headers[i])
					continue
				}
				hdr.Set(tt.headers[i], tt.headers[i+1])
			}
			req := &envoytest.Request{Method: http.MethodPost, Path: "/mcp", Authority: "mcp.example", Headers: hdr, Body: [][]byte{tt.body}}
			res := h.do(req, jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":7,"result":{}}`))
			saw := len(guard.Calls()) > 0
			if tt.seen {
				if !saw {
					t.Fatalf("BYPASS: the plugin never saw the call (status %d, upstream reached %v)", res.Status, res.UpstreamRequest != nil)
				}
				return
			}
			if res.UpstreamRequest != nil && !saw {
				t.Fatalf("BYPASS: the request reached the server uninspected (status %d)", res.Status)
			}
			if res.Status != tt.status {
				t.Errorf("status %d, want %d (body %s)", res.Status, tt.status, res.Body)
			}
			if !bytes.Contains(res.Body, []byte(`"error"`)) || !bytes.Contains(res.Body, []byte(`"jsonrpc":"2.0"`)) {
				t.Errorf("refusal body is not a JSON-RPC error: %s", res.Body)
			}
		})
	}
}
