package pluginserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// exchange is what a recorder saw of one HTTP request and its answer.
type exchange struct {
	httpMethod, rpcMethod, version string // version: the Mcp-Protocol-Version header sent
	status                         int
	sessionIn, sessionOut          string // Mcp-Session-Id sent and answered
}

// recorder records exchanges and hands each request to the next handler in
// turn, as a balancer that picks a replica per request would.
type recorder struct {
	next []http.Handler
	n    atomic.Uint64

	mu  sync.Mutex
	log []exchange
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		Method string `json:"method"`
	}
	if r.Body != nil {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		_ = json.Unmarshal(body, &msg)
	}
	// Recorded in arrival order; the answer is filled in when it is done.
	rec.mu.Lock()
	i := len(rec.log)
	rec.log = append(rec.log, exchange{
		httpMethod: r.Method, rpcMethod: msg.Method, version: r.Header.Get("Mcp-Protocol-Version"),
		sessionIn: r.Header.Get("Mcp-Session-Id"),
	})
	rec.mu.Unlock()
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	h := rec.next[int(rec.n.Add(1)-1)%len(rec.next)]
	h.ServeHTTP(sw, r)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.log[i].status = sw.status
	rec.log[i].sessionOut = w.Header().Get("Mcp-Session-Id")
}

func (rec *recorder) exchanges() []exchange {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.log)
}

// rpcMethods lists the JSON-RPC methods POSTed, in order.
func rpcMethods(xs []exchange) []string {
	var out []string
	for _, x := range xs {
		if x.httpMethod == http.MethodPost {
			out = append(out, x.rpcMethod)
		}
	}
	return out
}

// TestStatelessAndStatefulWithOldAndNewClients pins down what go-sdk v1.8.0
// does in each combination, behind a balancer that sends every request to
// the next of two replicas: the stateless server serves both protocol
// generations with no session at all, so the replica does not matter; the
// stateful one makes even a 2026-07-28 client fall back to initialize, and
// its session exists on one replica only.
func TestStatelessAndStatefulWithOldAndNewClients(t *testing.T) {
	tests := []struct {
		name          string
		stateless     bool
		clientVersion string // "": the SDK's default (2026-07-28)
		wantMethods   []string
		wantSession   bool
	}{
		{"stateless, 2026-07-28 client", true, "", []string{"server/discover", "tools/call", "tools/call"}, false},
		{"stateless, 2025-11-25 client", true, "2025-11-25",
			[]string{"initialize", "notifications/initialized", "tools/call", "tools/call"}, false},
		{"stateful, 2026-07-28 client", false, "",
			[]string{"server/discover", "initialize", "notifications/initialized", "tools/call", "tools/call"}, true},
		{"stateful, 2025-11-25 client", false, "2025-11-25",
			[]string{"initialize", "notifications/initialized", "tools/call", "tools/call"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := pluginserver.NewWithOptions(&pluginserver.Options{Stateless: tt.stateless}, pluginserver.Func(denyCfg, nil))
			defer srv.Close()
			replicas := []http.Handler{srv.Handler()}
			if tt.stateless {
				replicas = append(replicas, srv.Handler()) // a second, independent endpoint
			}
			rec := &recorder{next: replicas}
			ts := httptest.NewServer(rec)
			defer ts.Close()

			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL, DisableStandaloneSSE: true},
				&mcp.ClientSessionOptions{ProtocolVersion: tt.clientVersion})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			for range 2 {
				args := cpex.InvokeHookArgs{HookType: cpex.ToolPreInvoke, PluginName: denyCfg.Name,
					Payload: json.RawMessage(`{"name":"t","args":{}}`), Context: cpex.NewContext(cpex.GlobalContext{RequestID: "r"})}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: cpex.ToolInvokeHook, Arguments: args})
				if err != nil || res.IsError {
					t.Fatalf("invoke_hook: %v %+v", err, res)
				}
			}
			// Every exchange is recorded once its handler has returned,
			// which can be after the client got its answer.
			cs.Close()
			ts.Close()
			xs := rec.exchanges()
			if got := rpcMethods(xs); !slices.Equal(got, tt.wantMethods) {
				t.Errorf("JSON-RPC methods %q, want %q", got, tt.wantMethods)
			}
			var sessions bool
			for _, x := range xs {
				sessions = sessions || x.sessionOut != "" || x.sessionIn != ""
				if x.status >= 300 && x.rpcMethod != "server/discover" {
					t.Errorf("%s %s answered %d", x.httpMethod, x.rpcMethod, x.status)
				}
			}
			if sessions != tt.wantSession {
				t.Errorf("Mcp-Session-Id seen: %v, want %v (%+v)", sessions, tt.wantSession, xs)
			}
		})
	}
}

// TestStatelessRefusesGETAndDELETE: there is no stream or session to open
// or end.
func TestStatelessRefusesGETAndDELETE(t *testing.T) {
	srv := pluginserver.NewWithOptions(&pluginserver.Options{Stateless: true}, pluginserver.Func(denyCfg, nil))
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		req, err := http.NewRequestWithContext(ctx, method, ts.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", "any")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: status %d, want 405", method, resp.StatusCode)
		}
	}
	// An initialize is answered, without a session.
	resp := post(t, ts.URL, "", initBody)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("initialize: status %d, Mcp-Session-Id %q; want 200 and none", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"))
	}
}
