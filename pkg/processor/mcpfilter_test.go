package processor_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
)

// mcpFilterCall sends body as the caller of token, with what Envoy's MCP
// filter (before ext_proc) wrote for it, or meta instead when set.
type mcpFilterCall func(token, body string, meta *structpb.Struct, up envoytest.Upstream) *envoytest.Result

func mcpFilterHarness(t *testing.T, config string) mcpFilterCall {
	h := newHarness(t, config)
	h.filter.Forwarding = envoytest.Forwarding{
		MetadataNamespaces:  []string{"envoy.filters.http.jwt_authn", envoytest.MCPFilterNamespace},
		ReceivingNamespaces: []string{processor.MetadataNamespace},
	}
	return func(token, body string, meta *structpb.Struct, up envoytest.Upstream) *envoytest.Result {
		req := mcpPost(body)
		req.Info = *jwtInfo(&http.Request{Header: http.Header{"Authorization": {"Bearer " + token}}})
		if meta == nil {
			var invalid bool
			if meta, invalid = envoytest.MCPFilterMetadata([]byte(body), 8192); invalid {
				t.Fatalf("Envoy's MCP filter would refuse %s", body)
			}
		}
		req.Info.DynamicMetadata[envoytest.MCPFilterNamespace] = meta
		return h.do(req, up)
	}
}

// TestMCPFilterMethod: with the method Envoy's MCP filter read from a
// 2025-11-25 body, the rules read a list's answer only when they may hide
// some of it from the caller, and a tools/call's not at all: the messages
// of a 2026-07-28 request. A body whose method is not the one Envoy read
// is refused before the server sees it; metadata that is not a request,
// or a configuration that does not read it, changes nothing.
func TestMCPFilterMethod(t *testing.T) {
	call := mcpFilterHarness(t, rulesConfig)
	list := `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`
	callResult := `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`
	notRequest, _ := structpb.NewStruct(map[string]any{"method": "tools/call", "is_mcp_request": false})
	for _, tc := range []struct {
		name, token, body string
		meta              *structpb.Struct
		up                string
		msgs              int
		want              string
	}{
		{"tools/call: the answer is not read", "dev-token", echoCall, nil, callResult, 2, callResult},
		{"list, dev: filtered", "dev-token", list, nil, threeTools, 4,
			`{"jsonrpc":"2.0","id":5,"result":{"tools":[{"name":"echo"}],"nextCursor":"c2"}}`},
		{"list, admin: nothing to hide, not read", "admin-token", list, nil, threeTools, 2, threeTools},
		{"not a request by Envoy's reading: as without the filter", "dev-token", echoCall, notRequest, callResult, 3, callResult},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(tc.token, tc.body, tc.meta, jsonUpstream(http.StatusOK, tc.up))
			if string(res.Body) != tc.want {
				t.Errorf("client got %s, want %s", res.Body, tc.want)
			}
			if len(res.Sent) != tc.msgs {
				t.Errorf("%d ext_proc messages, want %d", len(res.Sent), tc.msgs)
			}
		})
	}

	t.Run("Envoy read another method: refused", func(t *testing.T) {
		forged, _ := envoytest.MCPFilterMetadata([]byte(echoCall), 8192)
		res := call("dev-token", list, forged, noUpstream(t))
		if res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), "Envoy's MCP filter") ||
			!strings.Contains(string(res.Body), `"id":5`) {
			t.Errorf("a tools/list that Envoy read as tools/call: %d %s, want 400 and a JSON-RPC error with id 5", res.Status, res.Body)
		}
	})

	t.Run("mcp_filter_namespace: off", func(t *testing.T) {
		off := mcpFilterHarness(t, strings.Replace(rulesConfig, "extproc:\n", "extproc:\n  mcp_filter_namespace: \"off\"\n", 1))
		res := off("dev-token", echoCall, nil, jsonUpstream(http.StatusOK, callResult))
		if len(res.Sent) != 3 {
			t.Errorf("%d ext_proc messages with the filter's metadata not read, want 3", len(res.Sent))
		}
	})
}

// TestMCPFilterEndToEnd: a real Go SDK client speaking 2025-11-25 and a
// real server behind the fake Envoy playing its MCP filter before
// ext_proc: every page of the caller's tools/list shows only its tools,
// JSON and SSE, a hidden tool called by name is refused, and a tools/call
// costs two ext_proc messages (its answer is not read), as Envoy's reading
// of the method lets it.
func TestMCPFilterEndToEnd(t *testing.T) {
	for _, jsonResponse := range []bool{true, false} {
		var mu sync.Mutex
		var callMsgs []int // ext_proc messages of each tools/call
		endpoint, _ := rulesFront(t, rulesServer(jsonResponse), func(p *envoytest.Proxy) {
			p.MCPFilter = &envoytest.MCPFilter{MaxRequestBodyBytes: 1 << 20}
			p.Observe = func(res *envoytest.Result, _ error) {
				if res != nil && res.UpstreamRequest != nil && strings.Contains(string(res.UpstreamRequest.Body), `"tools/call"`) {
					mu.Lock()
					callMsgs = append(callMsgs, len(res.Sent))
					mu.Unlock()
				}
			}
		})
		dev := connectAsVersion(t, endpoint, "dev-token", v25)
		if v := dev.InitializeResult().ProtocolVersion; v != v25 {
			t.Fatalf("negotiated %s, want %s: the test would not show the 2025 path", v, v25)
		}
		if got, want := listedTools(t, dev), []string{"echo", "read_file", "search", "status"}; !slices.Equal(got, want) {
			t.Errorf("json %v: dev sees %v, want %v", jsonResponse, got, want)
		}
		if _, err := callTool(t, dev, "delete_file", map[string]any{"path": "/tmp/x"}); err == nil || !strings.Contains(err.Error(), "only admins") {
			t.Errorf("json %v: dev calling delete_file: %v, want refused", jsonResponse, err)
		}
		if res, err := callTool(t, dev, "echo", map[string]any{}); err != nil || res.IsError {
			t.Fatalf("json %v: echo: %v %+v", jsonResponse, err, res)
		}
		// Observe runs before the proxy's handler returns, which may be
		// after the client has read the whole answer.
		var last []int
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			mu.Lock()
			last = slices.Clone(callMsgs)
			mu.Unlock()
			if len(last) > 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(last) == 0 || last[len(last)-1] != 2 {
			t.Errorf("json %v: ext_proc messages of the tools/call that reached the server: %v, want 2", jsonResponse, last)
		}
	}
}

// TestDeclaredMethodAgainstMCPFilter: a 2026-07-28 request whose trusted
// Mcp-Method names a method no hook applies to (ping) while Envoy's MCP
// filter read a tools/call from its body is refused by the sidecar at the
// request headers, never passed on the header's word; a request whose
// header and body agree passes as before.
func TestDeclaredMethodAgainstMCPFilter(t *testing.T) {
	guard := policyGuard(t)
	h := newHarness(t, guardConfig("fail", "5"), guard)
	h.filter.Forwarding = envoytest.Forwarding{MetadataNamespaces: []string{envoytest.MCPFilterNamespace}}
	send := func(body, declared string, up envoytest.Upstream) *envoytest.Result {
		req := mcpPost(body, "Mcp-Protocol-Version", v26, "Mcp-Method", declared)
		meta, invalid := envoytest.MCPFilterMetadata([]byte(body), 8192)
		if invalid {
			t.Fatalf("Envoy's MCP filter would refuse %s", body)
		}
		req.Info.DynamicMetadata = map[string]*structpb.Struct{envoytest.MCPFilterNamespace: meta}
		return h.do(req, up)
	}
	res := send(toolCall(1, denyWord), "ping", noUpstream(t))
	if res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), "-32020") || !strings.Contains(string(res.Body), "Mcp-Method") {
		t.Fatalf("tools/call declared as ping: %d %s, want 400 and a header mismatch", res.Status, res.Body)
	}
	if n := guard.CallCount(); n != 0 {
		t.Errorf("the plugin was asked %d times about a refused request", n)
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	ok := `{"jsonrpc":"2.0","id":2,"result":{}}`
	if res := send(ping, "ping", jsonUpstream(http.StatusOK, ok)); string(res.Body) != ok || len(res.Sent) != 1 {
		t.Errorf("ping declared as ping: %d %s in %d messages, want the server's answer in 1", res.Status, res.Body, len(res.Sent))
	}
}
