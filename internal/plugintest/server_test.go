package plugintest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testTimeout = 10 * time.Second

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`

// rawClient sends raw MCP HTTP requests with its own transport.
type rawClient struct {
	t  *testing.T
	hc *http.Client
}

func newRawClient(t *testing.T) *rawClient {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &rawClient{t: t, hc: &http.Client{Transport: tr}}
}

type answer struct {
	status      int
	contentType string
	session     string
	body        string
}

// do sends one request; err is the transport error, if any.
func (c *rawClient) do(ctx context.Context, method, url, session, body string) (answer, error) {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Mcp-Session-Id"), string(b)}, nil
}

func (c *rawClient) post(url, session, body string) answer {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	a, err := c.do(ctx, http.MethodPost, url, session, body)
	if err != nil {
		c.t.Fatalf("POST %s: %v", url, err)
	}
	return a
}

// initialize opens a session and returns its id.
func (c *rawClient) initialize(url string) string {
	c.t.Helper()
	a := c.post(url, "", initBody)
	if a.status != http.StatusOK || a.session == "" {
		c.t.Fatalf("initialize: %+v", a)
	}
	if got := c.post(url, a.session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); got.status != http.StatusAccepted {
		c.t.Fatalf("initialized notification: %+v", got)
	}
	return a.session
}

func startPlugin(t *testing.T, f plugintest.Flavour, opts *pluginserver.Options) (*plugintest.Server, *plugintest.Scripted) {
	p := plugintest.NewScripted("Probe", cpex.ToolPreInvoke, cpex.ToolPostInvoke)
	return plugintest.StartPlugins(t, f, opts, p), p
}

func TestFlavourAnswersUnknownSession(t *testing.T) {
	for _, f := range plugintest.Flavours() {
		for _, jsonResponse := range []bool{false, true} {
			name := f.String()
			if jsonResponse {
				name += "/JSONResponse"
			}
			t.Run(name, func(t *testing.T) {
				srv, _ := startPlugin(t, f, &pluginserver.Options{JSONResponse: jsonResponse})
				c := newRawClient(t)
				sid := c.initialize(srv.URL())

				// A known session is served.
				if a := c.post(srv.URL(), sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); a.status != http.StatusOK || !strings.Contains(a.body, cpex.ToolInvokeHook) {
					t.Fatalf("tools/list on live session: %+v", a)
				}

				wantStatus, wantType, wantBody := f.UnknownSessionAnswer()
				check := func(what string, a answer) {
					t.Helper()
					if a.status != wantStatus || a.contentType != wantType || a.body != wantBody {
						t.Errorf("%s: got %d %q %q, want %d %q %q", what, a.status, a.contentType, a.body, wantStatus, wantType, wantBody)
					}
				}
				check("never issued id", c.post(srv.URL(), "0123456789abcdef", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`))

				// After a restart the old id is unknown.
				srv.Restart()
				c.hc.CloseIdleConnections() // the old connection is dead
				check("id of the previous instance", c.post(srv.URL(), sid, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`))
			})
		}
	}
}

func TestFlavourBodiesMatchTheRecordings(t *testing.T) {
	// stale-session.http was recorded from a TypeScript example server.
	status, ct, body := plugintest.BadRequest400.UnknownSessionAnswer()
	if status != http.StatusBadRequest || ct != "application/json; charset=utf-8" ||
		body != `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}` {
		t.Errorf("BadRequest400 answer %d %q %q differs from the recorded answer (pkg/mcpmsg/testdata/responses/README.md)", status, ct, body)
	}
	for _, f := range plugintest.Flavours()[1:] {
		_, _, body := f.UnknownSessionAnswer()
		var msg struct {
			JSONRPC string `json:"jsonrpc"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &msg); err != nil || msg.JSONRPC != "2.0" || msg.Error.Code == 0 {
			t.Errorf("%v: body %q is not a JSON-RPC error (%v)", f, body, err)
		}
	}
}

func TestFlavourForgetsDeletedSession(t *testing.T) {
	srv, _ := startPlugin(t, plugintest.NotFoundJSON32001, nil)
	c := newRawClient(t)
	sid := c.initialize(srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	a, err := c.do(ctx, http.MethodDelete, srv.URL(), sid, "")
	if err != nil || a.status != http.StatusNoContent {
		t.Fatalf("DELETE: %+v %v", a, err)
	}
	_, _, want := plugintest.NotFoundJSON32001.UnknownSessionAnswer()
	if a := c.post(srv.URL(), sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); a.status != http.StatusNotFound || a.body != want {
		t.Errorf("deleted session: %+v, want 404 %s", a, want)
	}
}

func TestRestartEmptiesSessionStoreOnSameAddress(t *testing.T) {
	srv, _ := startPlugin(t, plugintest.GoSDK, nil)
	url := srv.URL()
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/mcp") {
		t.Fatalf("URL = %q", url)
	}
	c := newRawClient(t)
	sid := c.initialize(url)
	srv.Restart()
	c.hc.CloseIdleConnections() // the old connection is dead
	if srv.URL() != url {
		t.Errorf("URL changed across restart: %q -> %q", url, srv.URL())
	}
	if a := c.post(url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); a.status != http.StatusNotFound {
		t.Errorf("old session after restart: %+v, want 404", a)
	}
	sid2 := c.initialize(url)
	if sid2 == sid {
		t.Errorf("new session reuses old id %q", sid)
	}
	// Restart of a stopped server brings it back too.
	srv.Stop()
	srv.Restart()
	c.hc.CloseIdleConnections()
	if !srv.Running() {
		t.Fatal("not running after Restart from stopped")
	}
	c.initialize(url)
}

func TestInitializesCountsAcrossRestarts(t *testing.T) {
	srv, _ := startPlugin(t, plugintest.GoSDK, nil)
	c := newRawClient(t)
	if got := srv.Initializes(); got != 0 {
		t.Fatalf("Initializes() = %d before any request", got)
	}
	c.initialize(srv.URL())
	c.initialize(srv.URL())
	srv.Restart()
	c.hc.CloseIdleConnections()
	c.initialize(srv.URL())
	// A batch holding an initialize counts it; other methods do not count.
	c.post(srv.URL(), "", `[{"jsonrpc":"2.0","id":9,"method":"ping"}]`)
	if got := srv.Initializes(); got != 3 {
		t.Errorf("Initializes() = %d, want 3", got)
	}
}

func TestStopRefusesConnections(t *testing.T) {
	srv, _ := startPlugin(t, plugintest.GoSDK, nil)
	c := newRawClient(t)
	c.initialize(srv.URL())
	srv.Stop()
	if srv.Running() {
		t.Error("Running() after Stop")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// The kept-alive connection is gone (EOF or reset, or refused if the
	// client noticed before sending).
	if _, err := c.do(ctx, http.MethodPost, srv.URL(), "", initBody); err == nil {
		t.Error("POST on the old connection after Stop succeeded")
	}
	// A new connection is refused.
	c.hc.CloseIdleConnections()
	if _, err := c.do(ctx, http.MethodPost, srv.URL(), "", initBody); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("POST after Stop: %v, want connection refused", err)
	}
	srv.Stop() // idempotent
}

func TestHangThenStopDropsRequestsAndLeaksNothing(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	srv, _ := startPlugin(t, plugintest.NotFoundJSON32600, nil)
	c := newRawClient(t)
	sid := c.initialize(srv.URL())
	srv.SetHang(true)

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	type result struct {
		a   answer
		err error
	}
	const n = 3
	results := make(chan result, n)
	for range n {
		go func() {
			a, err := c.do(ctx, http.MethodPost, srv.URL(), sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			results <- result{a, err}
		}()
	}
	// Wait until the server holds all n requests.
	for len(srv.Requests()) < 2+n {
		select {
		case r := <-results:
			t.Fatalf("hung server answered: %+v %v", r.a, r.err)
		case <-ctx.Done():
			t.Fatal("requests never reached the server")
		case <-time.After(5 * time.Millisecond):
		}
	}
	srv.Stop()
	for range n {
		select {
		case r := <-results:
			if r.err == nil {
				t.Errorf("hung request got an answer after Stop: %+v", r.a)
			}
		case <-ctx.Done():
			t.Fatal("hung request not released by Stop")
		}
	}
	c.hc.CloseIdleConnections()
	goleak.VerifyNone(t, ignore)
}

func TestUnhangServesHeldRequests(t *testing.T) {
	srv, _ := startPlugin(t, plugintest.GoSDK, nil)
	c := newRawClient(t)
	sid := c.initialize(srv.URL())
	srv.SetHang(true)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	done := make(chan answer, 1)
	go func() {
		a, _ := c.do(ctx, http.MethodPost, srv.URL(), sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		done <- a
	}()
	for len(srv.Requests()) < 3 {
		select {
		case <-ctx.Done():
			t.Fatal("request never reached the server")
		case <-time.After(5 * time.Millisecond):
		}
	}
	select {
	case a := <-done:
		t.Fatalf("hung server answered: %+v", a)
	default:
	}
	srv.SetHang(false)
	select {
	case a := <-done:
		if a.status != http.StatusOK {
			t.Errorf("released request: %+v", a)
		}
	case <-ctx.Done():
		t.Fatal("request still hung after SetHang(false)")
	}
}

// TestGoSDKClientThroughFlavours runs a real go-sdk client session through
// every flavour wrapper (SSE streaming must survive the wrapper) and checks
// what the Scripted plugin and the request log saw.
func TestGoSDKClientThroughFlavours(t *testing.T) {
	for _, f := range plugintest.Flavours() {
		t.Run(f.String(), func(t *testing.T) {
			srv, probe := startPlugin(t, f, nil)
			probe.SetFunc(plugintest.Block(cpex.PluginViolation{Reason: "no", Description: "blocked", Code: "X"}))
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: traceparent{tr}}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).
				Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL(), HTTPClient: hc}, nil)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: cpex.ToolInvokeHook, Arguments: map[string]any{
				"hook_type": "tool_pre_invoke", "plugin_name": "probe",
				"payload": map[string]any{"name": "rm", "args": map[string]any{"path": "/"}},
				"context": map[string]any{"global_context": map[string]any{"request_id": "r1"}},
			}})
			if err != nil {
				t.Fatalf("invoke_hook: %v", err)
			}
			var reply cpex.InvokeHookReply
			if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &reply); err != nil {
				t.Fatal(err)
			}
			if reply.PluginName != "Probe" || reply.Result == nil || reply.Result.Continue() || reply.Result.Violation.Code != "X" {
				t.Errorf("reply = %+v", reply)
			}
			calls := probe.Calls()
			if len(calls) != 1 || calls[0].Hook != cpex.ToolPreInvoke || calls[0].Context.GlobalContext.RequestID != "r1" ||
				string(calls[0].Payload) != `{"args":{"path":"/"},"name":"rm"}` {
				t.Errorf("calls = %+v", calls)
			}
			req, ok := srv.LastToolCall(cpex.ToolInvokeHook)
			if !ok || req.Header.Get("Traceparent") != traceID {
				t.Errorf("last invoke_hook request %+v (found %v), want traceparent %s", req, ok, traceID)
			}
			if srv.Initializes() != 1 {
				t.Errorf("Initializes() = %d, want 1", srv.Initializes())
			}
			cs.Close()
		})
	}
}

const traceID = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// traceparent adds a W3C traceparent header to every request.
type traceparent struct{ next http.RoundTripper }

func (t traceparent) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Traceparent", traceID)
	return t.next.RoundTrip(r)
}
