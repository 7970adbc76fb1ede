package mcpecho

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/mcpheaders"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStatelessGoClient: the Go SDK v1.8.0 client speaks 2026-07-28 to the
// stateless server and mirrors the account argument into Mcp-Param-Account,
// which the tool sees.
func TestStatelessGoClient(t *testing.T) {
	srv := httptest.NewServer(StatelessHandler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil { // the client learns x-mcp-header here
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: TransferTool, Arguments: map[string]any{"account": "acme-42", "amount": 5}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "transfer 5 from acme-42 (header acme-42)" {
		t.Fatalf("result %q", got)
	}
}

const v26 = "2026-07-28"

// call26 is a raw 2026-07-28 tools/call of TransferTool with the given
// arguments and headers (the standard ones unless overridden).
func call26(t *testing.T, srv *httptest.Server, args string, header map[string]string) reply {
	t.Helper()
	h := map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "tools/call", "Mcp-Name": TransferTool}
	for k, v := range header {
		h[k] = v
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":%q,"arguments":%s,`+
		`"_meta":{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientCapabilities":{}}}}`, TransferTool, args, v26)
	return do(t, srv, http.MethodPost, h, body)
}

// TestStatelessHeaderChecks: the server refuses headers that disagree with
// the body with HTTP 400 and -32020 — also when only the header kept the
// value a rewrite removed from the body — and accepts the headers that
// mcpheaders.Mirror rebuilds after such a rewrite.
func TestStatelessHeaderChecks(t *testing.T) {
	srv := httptest.NewServer(StatelessHandler())
	defer srv.Close()
	orig := `{"account":"acme-42","amount":5}`
	redacted := `{"account":"[REDACTED]","amount":5}`
	tests := []struct {
		name   string
		args   string
		header map[string]string
		want   string // result text, or "" for a -32020 refusal
	}{
		{"agree", orig, map[string]string{AccountHeader: "acme-42"}, "transfer 5 from acme-42 (header acme-42)"},
		{"param header differs", orig, map[string]string{AccountHeader: "other"}, ""},
		{"body redacted, header not", redacted, map[string]string{AccountHeader: "acme-42"}, ""},
		{"param header missing", orig, nil, ""},
		{"name differs", orig, map[string]string{AccountHeader: "acme-42", "Mcp-Name": "echo"}, ""},
		{"method differs", orig, map[string]string{AccountHeader: "acme-42", "Mcp-Method": "tools/list"}, ""},
		{"base64 header", `{"account":"café","amount":1}`, map[string]string{AccountHeader: mcpheaders.EncodeValue("café")}, "transfer 1 from café (header " + mcpheaders.EncodeValue("café") + ")"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call26(t, srv, tt.args, tt.header)
			if tt.want == "" {
				m := decode(t, r.Body)
				if r.Status != http.StatusBadRequest || m.Error == nil || m.Error.Code != mcpheaders.CodeHeaderMismatch {
					t.Fatalf("got %d %s; want 400 with -32020", r.Status, r.Body)
				}
				return
			}
			if r.Status != http.StatusOK || !strings.Contains(string(r.Body), tt.want) {
				t.Fatalf("got %d %s; want %q", r.Status, r.Body, tt.want)
			}
		})
	}

	// The same redaction with the headers Mirror plans: accepted, and the
	// server sees only the redacted value, in body and header.
	sent := []mcpheaders.Header{{Name: "Mcp-Protocol-Version", Value: v26}, {Name: "Mcp-Method", Value: "tools/call"},
		{Name: "Mcp-Name", Value: TransferTool}, {Name: AccountHeader, Value: "acme-42"}}
	plan := mcpheaders.Mirror(sent, mcpheaders.Rewrite{Method: "tools/call", OrigName: TransferTool, NewName: TransferTool,
		OrigArgs: []byte(orig), NewArgs: []byte(redacted)})
	if len(plan.Set) != 1 || len(plan.Remove) != 0 {
		t.Fatalf("plan = %+v", plan)
	}
	r := call26(t, srv, redacted, map[string]string{plan.Set[0].Name: plan.Set[0].Value})
	if want := "transfer 5 from [REDACTED] (header [REDACTED])"; r.Status != http.StatusOK || !strings.Contains(string(r.Body), want) {
		t.Fatalf("after Mirror: %d %s; want %q", r.Status, r.Body, want)
	}
}
