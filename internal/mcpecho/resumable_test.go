package mcpecho

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// session initializes a 2025-11-25 session on srv and returns its id and a
// func that deletes it (the server keeps a goroutine per session).
func session(t *testing.T, srv *httptest.Server) (string, func()) {
	t.Helper()
	r := do(t, srv, http.MethodPost, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	sid := r.Header.Get("Mcp-Session-Id")
	if r.Status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q %s", r.Status, sid, r.Body)
	}
	h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	if r := do(t, srv, http.MethodPost, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.Status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", r.Status, r.Body)
	}
	return sid, func() { do(t, srv, http.MethodDelete, h, "") }
}

// TestResumableReplay: a POST stream starts with a priming event, and GET
// with Last-Event-ID replays the stream's later events, the tool's original
// response included — from the priming id and from every later id.
func TestResumableReplay(t *testing.T) {
	srv := httptest.NewServer(ResumableHandler())
	defer srv.Close()
	sid, end := session(t, srv)
	defer end()
	h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}

	post := do(t, srv, http.MethodPost, h, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2},"_meta":{"progressToken":"p"}}}`)
	if post.Status != http.StatusOK || len(post.Events) != 4 {
		t.Fatalf("POST: %d, %d events: %s", post.Status, len(post.Events), post.Body)
	}
	prime := post.Events[0]
	if prime.ID == "" || prime.HasData {
		t.Fatalf("first event %+v is not a priming event", prime)
	}
	want := responses(t, post.Events)[`2`]
	if !strings.Contains(string(want.Result), "done after 2 steps") {
		t.Fatalf("POST result = %s", want.Result)
	}
	for i, from := range post.Events[:len(post.Events)-1] {
		hh := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25", "Last-Event-ID": from.ID}
		get := do(t, srv, http.MethodGet, hh, "")
		if get.Status != http.StatusOK {
			t.Fatalf("GET after %s: %d %s", from.ID, get.Status, get.Body)
		}
		if len(get.Events) != len(post.Events)-1-i {
			t.Fatalf("GET after event %d replayed %d events: %s", i, len(get.Events), get.Body)
		}
		got, ok := responses(t, get.Events)[`2`]
		if !ok || string(got.Result) != string(want.Result) {
			t.Fatalf("GET after event %d: response %s, want the original %s", i, got.Result, want.Result)
		}
	}
}

// TestResumableGoClient: the Go SDK client negotiates 2025-11-25 with the
// stateful server and calls a tool through it.
func TestResumableGoClient(t *testing.T) {
	srv := httptest.NewServer(ResumableHandler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated %q", v)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "echo: hi" {
		t.Fatalf("CallTool = %+v, %v", res, err)
	}
}
