package processor

import (
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// TestPlan: what the request headers ask Envoy for, by the one function
// that decides it, as a table: the reply (which bodies and headers Envoy
// sends) and the phase the stream goes on in.
func TestPlan(t *testing.T) {
	prePost, preOnly := &fakeHooks{}, &fakeHooks{preOnly: true}
	v2026 := []string{"mcp-protocol-version", "2026-07-28"}
	for _, tc := range []struct {
		name    string
		hooks   *fakeHooks
		headers []string // after :method and :path
		method  string
		path    string
		eos     bool
		reply   func(*canned) *extprocv3.ProcessingResponse
		phase   phase
	}{
		{"not an MCP path", prePost, nil, "POST", "/other", false, func(c *canned) *extprocv3.ProcessingResponse { return c.skipAll }, passThrough{}},
		{"a POST whose answer a post hook may read", prePost, nil, "POST", "/mcp", false, func(c *canned) *extprocv3.ProcessingResponse { return c.inspectRequest }, awaitingBody{}},
		{"a POST with pre hooks only", preOnly, nil, "POST", "/mcp", false, func(c *canned) *extprocv3.ProcessingResponse { return c.inspectRequestOnly }, awaitingBody{}},
		{"a POST without a body", prePost, nil, "POST", "/mcp", true, func(c *canned) *extprocv3.ProcessingResponse { return c.skipAll }, passThrough{}},
		{"a declared method no hook has", prePost, append(v2026, "mcp-method", "ping"), "POST", "/mcp", false, func(c *canned) *extprocv3.ProcessingResponse { return c.skipAll }, passThrough{}},
		{"a declared tools/call, pre hooks only", preOnly, append(v2026, "mcp-method", "tools/call", "mcp-name", "echo"), "POST", "/mcp", false, func(c *canned) *extprocv3.ProcessingResponse { return c.inspectRequestOnly }, awaitingBody{}},
		{"a declared tools/call, pre and post", prePost, append(v2026, "mcp-method", "tools/call", "mcp-name", "echo"), "POST", "/mcp", false, func(c *canned) *extprocv3.ProcessingResponse { return c.inspectRequest }, awaitingBody{}},
		{"a GET that may replay hooked answers", prePost, nil, "GET", "/mcp", true, func(c *canned) *extprocv3.ProcessingResponse { return c.readResponse }, awaitingAnswer{}},
		{"a GET with no post hook", preOnly, nil, "GET", "/mcp", true, func(c *canned) *extprocv3.ProcessingResponse { return c.skipAll }, passThrough{}},
		{"a DELETE", prePost, nil, "DELETE", "/mcp", true, func(c *canned) *extprocv3.ProcessingResponse { return c.skipAll }, passThrough{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := testStream(tc.hooks)
			msg := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
				Headers: headerMap(append([]string{":method", tc.method, ":path", tc.path}, tc.headers...)...), EndOfStream: tc.eos}}}
			resp, next := st.x.requestHeaders(msg)
			if want := tc.reply(st.x.canned); resp != want {
				t.Errorf("reply %v, want %v", resp.GetModeOverride(), want.GetModeOverride())
			}
			if next != tc.phase {
				t.Errorf("phase %T, want %T", next, tc.phase)
			}
		})
	}
}
