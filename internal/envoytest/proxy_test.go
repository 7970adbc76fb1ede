package envoytest

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// startProxy runs a Proxy in front of upstream, with fn as the processor.
func startProxy(t *testing.T, upstream string, f Filter, fn func(*extprocv3.ProcessingRequest) step) (*httptest.Server, *Proxy) {
	t.Helper()
	f.Client = Serve(t, &scripted{fn: fn})
	if f.MessageTimeout == 0 {
		f.MessageTimeout = generous
	}
	p := &Proxy{Filter: f, Upstream: mustParse(t, upstream)}
	front := httptest.NewServer(p)
	t.Cleanup(func() {
		front.Close()
		p.CloseIdleConnections()
	})
	return front, p
}

// sseStreamed switches text/event-stream responses to STREAMED (removing
// content-length, §4) and rewrites every chunk with transform.
func sseStreamed(transform func([]byte) []byte) func(*extprocv3.ProcessingRequest) step {
	return func(req *extprocv3.ProcessingRequest) step {
		switch {
		case req.GetResponseHeaders() != nil:
			r := pass(req)
			if strings.HasPrefix(headerOf(req, "content-type"), "text/event-stream") {
				r.ModeOverride = bothBodies(NONE, STREAMED)
				r.GetResponseHeaders().Response = &extprocv3.CommonResponse{HeaderMutation: headerMutation(nil, "content-length")}
			}
			return reply(r)
		case req.GetResponseBody() != nil:
			return reply(answer(req, &extprocv3.CommonResponse{BodyMutation: bodyTo(string(transform(req.GetResponseBody().GetBody())))}))
		}
		return passAll(req)
	}
}

func readEvent(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	var b strings.Builder
	for !strings.HasSuffix(b.String(), "\n\n") {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			t.Fatalf("read event: %v (got %q)", err, b.String())
		}
	}
	return b.String()
}

// The first event reaches the client while the upstream still holds the
// second one back: nothing on the way buffers the stream.
func TestProxyStreamsSSE(t *testing.T) {
	tests := []struct {
		name       string
		fn         func(*extprocv3.ProcessingRequest) step
		override   bool
		one, two   string
		wantStream bool
	}{
		{"STREAMED by mode_override, chunks rewritten", sseStreamed(upper), true, "DATA: ONE\n\n", "DATA: TWO\n\n", true},
		{"body mode NONE, copied through", passAll, false, "data: one\n\n", "data: two\n\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			finished := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(finished)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, "data: one\n\n")
				_ = http.NewResponseController(w).Flush()
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
				_, _ = io.WriteString(w, "data: two\n\n")
			}))
			defer up.Close()
			var mu sync.Mutex
			var results []*Result
			front, p := startProxy(t, up.URL, Filter{AllowModeOverride: tt.override}, tt.fn)
			p.Observe = func(r *Result, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("exchange: %v", err)
				}
				results = append(results, r)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+"/mcp", nil)
			req.Header.Set("Accept", "text/event-stream")
			resp, err := front.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if got := readEvent(t, br); got != tt.one {
				t.Errorf("first event %q, want %q", got, tt.one)
			}
			select {
			case <-finished:
				t.Fatal("the upstream finished before the first event was read")
			default:
			}
			close(release)
			if got := readEvent(t, br); got != tt.two {
				t.Errorf("second event %q, want %q", got, tt.two)
			}
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Errorf("after the events: %q, %v", rest, err)
			}
			front.Close() // waits for the handler, hence for Observe
			mu.Lock()
			defer mu.Unlock()
			if len(results) != 1 {
				t.Fatalf("%d exchanges", len(results))
			}
			var streamed bool
			for _, m := range results[0].Sent {
				streamed = streamed || m.GetResponseBody() != nil
			}
			if streamed != tt.wantStream || results[0].LocalError != "" {
				t.Errorf("response body sent to the processor = %v, LocalError %q", streamed, results[0].LocalError)
			}
		})
	}
}

// A reset (here: a timeout on a streamed chunk after the headers went out)
// aborts the downstream connection, so the client sees a broken body.
func TestProxyResetAbortsTheClient(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
	}))
	defer up.Close()
	// The first chunk is the first message, so no other reply races the
	// short timeout.
	hang := func(req *extprocv3.ProcessingRequest) step { return step{hang: true} }
	mode := &filterv3.ProcessingMode{RequestHeaderMode: SKIP, ResponseHeaderMode: SKIP, ResponseBodyMode: STREAMED}
	front, _ := startProxy(t, up.URL, Filter{Mode: mode, MessageTimeout: 20 * time.Millisecond}, hang)
	resp, err := front.Client().Get(front.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d, want the 200 already sent", resp.StatusCode)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("body read cleanly, want an error from the reset")
	}
}

// A local reply before the headers went out is a real HTTP answer.
func TestProxyLocalReply(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the upstream was called")
	}))
	defer up.Close()
	wrong := func(req *extprocv3.ProcessingRequest) step {
		return reply(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{}})
	}
	front, _ := startProxy(t, up.URL, Filter{}, wrong)
	resp, err := front.Client().Post(front.URL+"/mcp", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("status %d, want 500 for a spurious reply", resp.StatusCode)
	}
}

// A real go-sdk MCP client talks to a real go-sdk MCP server through the
// proxy; the processor rewrites the tools/call request body (BUFFERED, with a
// correct content-length) and streams SSE responses.
func TestProxyMCPEndToEnd(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "v0.0.1"}, nil)
	type echoIn struct {
		Message string `json:"message"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "echoes its message"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer up.Close()

	var rewritten sync.WaitGroup
	rewritten.Add(1)
	var once sync.Once
	fn := func(req *extprocv3.ProcessingRequest) step {
		switch {
		case req.GetRequestHeaders() != nil:
			r := pass(req)
			if headerOf(req, ":method") == http.MethodPost {
				r.ModeOverride = bothBodies(BUFFERED, NONE)
			}
			return reply(r)
		case req.GetRequestBody() != nil:
			body := req.GetRequestBody().GetBody()
			if !bytes.Contains(body, []byte(`"tools/call"`)) {
				return passAll(req)
			}
			once.Do(rewritten.Done)
			nb := bytes.ReplaceAll(body, []byte("hello"), []byte("HELLO, proxied"))
			return reply(answer(req, &extprocv3.CommonResponse{
				BodyMutation:   bodyTo(string(nb)),
				HeaderMutation: headerMutation([]*corev3.HeaderValueOption{setRaw("content-length", strconv.Itoa(len(nb)))}),
			}))
		}
		return sseStreamed(func(b []byte) []byte { return b })(req)
	}
	var mu sync.Mutex
	var failures []string
	streamedChunks := 0
	front, p := startProxy(t, up.URL, Filter{Mode: bothBodies(NONE, NONE), AllowModeOverride: true}, fn)
	p.Observe = func(r *Result, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil && r.LocalError != "" {
			failures = append(failures, r.LocalError+": "+r.Details)
		}
		for _, m := range r.Sent {
			if m.GetResponseBody() != nil {
				streamedChunks++
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0.0.1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: front.URL + "/"}, nil)
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello"}})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close session: %v", err)
	}
	rewritten.Wait()
	if len(res.Content) != 1 {
		t.Fatalf("content %+v", res.Content)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "HELLO, proxied" {
		t.Errorf("tool result %+v, want the processor's rewrite", res.Content[0])
	}
	front.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Errorf("local errors: %q", failures)
	}
	if streamedChunks == 0 {
		t.Error("no SSE response went through the processor in STREAMED mode")
	}
}
