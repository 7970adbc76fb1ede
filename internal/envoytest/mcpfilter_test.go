package envoytest

import (
	"strings"
	"testing"

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
