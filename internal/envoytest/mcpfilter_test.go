package envoytest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// TestMCPFilterMetadata: what the fake's MCP filter writes for a body, as
// Envoy's filter reads it.
func TestMCPFilterMetadata(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"pad":"` + strings.Repeat("x", 100) + `"}}}`
	for _, tc := range []struct {
		name, body string
		limit      int
		want       string // protojson of the metadata; "" none
		invalid    bool
	}{
		{"tools/call", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"a":[1,{"b":2}]}}}`, 8192,
			`{"id":3,"is_mcp_request":true,"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}`, false},
		{"resources/read keeps the uri", `{"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"uri":"file:///a","name":"x"}}`, 8192,
			`{"id":"r","is_mcp_request":true,"jsonrpc":"2.0","method":"resources/read","params":{"uri":"file:///a"}}`, false},
		{"the last method wins", `{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/list"}`, 8192,
			`{"id":1,"is_mcp_request":true,"jsonrpc":"2.0","method":"tools/list"}`, false},
		{"no jsonrpc: not a request", `{"id":1,"method":"tools/list"}`, 8192,
			`{"id":1,"is_mcp_request":false,"method":"tools/list"}`, false},
		{"a batch: nothing written", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, 8192, "", false},
		{"not JSON: 400", `{"jsonrpc":`, 8192, "", true},
		{"over the limit: what came before it", long, 60,
			`{"id":1,"is_exceeding_limit":true,"is_mcp_request":true,"jsonrpc":"2.0","method":"tools/call"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta, invalid := MCPFilterMetadata([]byte(tc.body), tc.limit)
			if invalid != tc.invalid {
				t.Fatalf("invalid %v, want %v", invalid, tc.invalid)
			}
			got := ""
			if meta != nil {
				b, err := protojson.Marshal(meta)
				if err != nil {
					t.Fatal(err)
				}
				got = strings.ReplaceAll(string(b), " ", "")
			}
			if got != tc.want {
				t.Errorf("metadata %s, want %s", got, tc.want)
			}
		})
	}
}

// TestProxyMCPFilter: the Proxy's MCP filter sends its metadata on the
// request headers, answers a body that is not JSON itself, and lowers the
// buffer limit, so ext_proc's BUFFERED read of a body over
// max_request_body_size is a 413, as in Envoy.
func TestProxyMCPFilter(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer up.Close()
	var mu sync.Mutex
	var methods []string
	buffered := func(req *extprocv3.ProcessingRequest) step {
		if req.GetRequestHeaders() == nil {
			return reply(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}})
		}
		mu.Lock()
		methods = append(methods, req.GetMetadataContext().GetFilterMetadata()[MCPFilterNamespace].GetFields()["method"].GetStringValue())
		mu.Unlock()
		return reply(&extprocv3.ProcessingResponse{
			Response:     &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}},
			ModeOverride: &filterv3.ProcessingMode{RequestBodyMode: filterv3.ProcessingMode_BUFFERED, ResponseBodyMode: filterv3.ProcessingMode_NONE, ResponseHeaderMode: filterv3.ProcessingMode_SKIP},
		})
	}
	front, p := startProxy(t, up.URL, Filter{AllowModeOverride: true, Forwarding: Forwarding{MetadataNamespaces: []string{MCPFilterNamespace}}}, buffered)
	p.MCPFilter = &MCPFilter{MaxRequestBodyBytes: 1024}
	post := func(body string) int {
		req, err := http.NewRequest(http.MethodPost, front.URL+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := front.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); got != http.StatusOK {
		t.Errorf("a small request: %d, want 200", got)
	}
	if got := post(`{"jsonrpc":`); got != http.StatusBadRequest {
		t.Errorf("a body that is not JSON: %d, want the filter's 400", got)
	}
	big := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"pad":"` + strings.Repeat("x", 4096) + `"}}}`
	if got := post(big); got != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over max_request_body_size, read BUFFERED by ext_proc: %d, want 413", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"tools/list", "tools/call"}; strings.Join(methods, ",") != strings.Join(want, ",") {
		t.Errorf("methods on the request headers %v, want %v (none for the body the filter refused)", methods, want)
	}
}
