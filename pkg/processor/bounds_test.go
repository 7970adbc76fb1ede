package processor_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/internal/syncbuf"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
)

const validTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestClientHeadersBoundedBeforePlugin: what a client sends in trace headers
// and x-request-id reaches the plugin's HTTP server only when valid and
// within its limits. The plugin server refuses headers over 16 KiB as Node
// does by default, so a forwarded oversized header would fail the call (and
// the test, as a plugin error).
func TestClientHeadersBoundedBeforePlugin(t *testing.T) {
	hugeState := "a=" + strings.Repeat("b", 20<<10)
	// Members valid one by one (W3C: values up to 256 characters).
	member := func(i int, n int) string { return fmt.Sprintf("k%02d=%s", i, strings.Repeat("v", n)) }
	var long, many []string
	for i := range 10 {
		long = append(long, member(i, 60)) // 10 members, over 512 bytes together
	}
	for i := range 33 {
		many = append(many, member(i, 1)) // 33 distinct short members
	}
	tests := []struct {
		name                  string
		kv                    []string
		wantParent, wantState string
		generatedID           bool
		wantID                string
	}{
		{"valid", []string{"Traceparent", validTraceparent, "Tracestate", "congo=t61rcWkgMzE", "X-Request-Id", "req-1"},
			validTraceparent, "congo=t61rcWkgMzE", false, "req-1"},
		{"20 KiB tracestate", []string{"Traceparent", validTraceparent, "Tracestate", hugeState},
			validTraceparent, "", true, ""},
		{"tracestate over 512 bytes", []string{"Traceparent", validTraceparent, "Tracestate", strings.Join(long, ",")},
			validTraceparent, "", true, ""},
		{"tracestate of 33 members", []string{"Traceparent", validTraceparent, "Tracestate", strings.Join(many, ",")},
			validTraceparent, "", true, ""},
		{"tracestate of 32 members within 512 bytes", []string{"Traceparent", validTraceparent, "Tracestate", strings.Join(many[:32], ",")},
			validTraceparent, strings.Join(many[:32], ","), true, ""},
		{"malformed tracestate", []string{"Traceparent", validTraceparent, "Tracestate", "no equals sign"},
			validTraceparent, "", true, ""},
		{"malformed traceparent", []string{"Traceparent", "00-xyz-00f067aa0ba902b7-01", "Tracestate", "congo=1"},
			"", "", true, ""},
		{"traceparent with extra fields in version 00", []string{"Traceparent", validTraceparent + "-" + strings.Repeat("f", 20<<10)},
			"", "", true, ""},
		{"later version re-encoded", []string{"Traceparent", "01" + validTraceparent[2:] + "-extra"},
			validTraceparent, "", true, ""},
		{"1 MiB x-request-id", []string{"X-Request-Id", strings.Repeat("r", 1<<20)}, "", "", true, ""},
		{"x-request-id at the limit", []string{"X-Request-Id", strings.Repeat("r", processor.MaxRequestIDBytes)},
			"", "", false, strings.Repeat("r", processor.MaxRequestIDBytes)},
	}
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
	h := newHarnessWith(t, oneGuard, harnessOptions{server: []plugintest.Option{plugintest.HeaderLimit(plugintest.NodeHeaderLimit)}}, guard)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := guard.CallCount()
			res := h.do(mcpPost(echoCall, tt.kv...), jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{}}`))
			if res.Immediate || guard.CallCount() != before+1 {
				t.Fatalf("immediate %v (%s), plugin calls %d: the call must be inspected and pass", res.Immediate, res.Body, guard.CallCount()-before)
			}
			req, _ := h.server.LastToolCall("invoke_hook")
			if got := req.Header.Get("Traceparent"); got != tt.wantParent {
				t.Errorf("traceparent %.80q, want %q", got, tt.wantParent)
			}
			if got := req.Header.Get("Tracestate"); got != tt.wantState {
				t.Errorf("tracestate %.80q, want %q", got, tt.wantState)
			}
			id := req.Header.Get("X-Request-Id")
			if tt.generatedID {
				if id == "" || len(id) > processor.MaxRequestIDBytes || strings.Contains(strings.Join(tt.kv, " "), id) {
					t.Errorf("x-request-id %.80q: want a generated one", id)
				}
			} else if id != tt.wantID {
				t.Errorf("x-request-id %.80q, want %.80q", id, tt.wantID)
			}
			calls := guard.Calls()
			if g := calls[len(calls)-1].Context.GlobalContext; g.RequestID != id || g.Metadata["tracestate"] != nil && g.Metadata["tracestate"] != tt.wantState {
				t.Errorf("plugin context request_id %.80q, tracestate %.80v; want %q, %q", g.RequestID, g.Metadata["tracestate"], id, tt.wantState)
			}
		})
	}
}

// TestForwardedHeaderBounded: a forwarded header over
// MaxForwardedHeaderBytes is left out of the payload; others go in.
func TestForwardedHeaderBounded(t *testing.T) {
	yaml := oneGuard + `
extproc:
  forward_headers: [x-small, x-big]
  user_header: x-user
`
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
	h := newHarness(t, yaml, guard)
	h.do(mcpPost(echoCall, "X-Small", "s", "X-Big", strings.Repeat("b", processor.MaxForwardedHeaderBytes+1), "X-User", strings.Repeat("u", 1<<20)),
		jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{}}`))
	calls := guard.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d calls", len(calls))
	}
	p := string(calls[0].Payload)
	if !strings.Contains(p, `"x-small":"s"`) || strings.Contains(p, "x-big") {
		t.Errorf("payload %.200s: want x-small and no x-big", p)
	}
	if u := calls[0].Context.GlobalContext.User; len(u) != 0 {
		t.Errorf("user %.80s from a 1 MiB header, want none", u)
	}
}

// TestLogLinesBounded: with 1 MiB client header values everywhere a log line
// can pick them up (debug level, --log-bodies, an unknown content-encoding,
// an oversized x-request-id), every line the processor writes — before the
// sidecar's logsafe.Writer — is under logsafe.MaxLine.
func TestLogLinesBounded(t *testing.T) {
	var logs syncbuf.Buffer
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
	guard.SetFunc(plugintest.Block(cpex.PluginViolation{Reason: "Denied", Description: "no", Code: "NO"}))
	h := newHarnessWith(t, oneGuard, harnessOptions{proc: func(o *processor.Options) {
		o.Logger = zerolog.New(&logs).Level(zerolog.DebugLevel)
		o.LogBodies = true
	}}, guard)
	huge := strings.Repeat("v", 1<<20)
	for _, kv := range [][]string{
		{"X-Request-Id", huge},
		{"Mcp-Session-Id", huge},
		{"Tracestate", huge, "Traceparent", validTraceparent},
		{"Traceparent", huge},
		{"X-Other", huge},
		{"Content-Encoding", huge},
		{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", huge},
		{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", huge},
	} {
		h.do(mcpPost(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"`+strings.Repeat("n", 64<<10)+`"}}`, kv...), jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{}}`))
	}
	out := logs.String()
	if out == "" {
		t.Fatal("nothing logged: the test logs nothing to check")
	}
	for _, line := range strings.Split(out, "\n") {
		if len(line)+1 >= logsafe.MaxLine {
			t.Errorf("log line of %d bytes: %.300s", len(line), line)
		}
	}
}
