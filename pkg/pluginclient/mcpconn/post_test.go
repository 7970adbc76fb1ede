package mcpconn

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// replyText is a tool result carrying an allowing invoke_hook reply.
const replyText = `{"content":[{"type":"text","text":"{\"plugin_name\":\"p\",\"result\":{\"continue_processing\":true}}"}]}`

// TestPostCallAnswers is the table of answers a tools/call made by
// postCaller may get, and what the call makes of each: the response is
// found past what precedes it, whatever the framing; anything else is
// the server's invalid answer or, cut off before the response, no answer.
func TestPostCallAnswers(t *testing.T) {
	sseOf := func(events ...string) string { return strings.Join(events, "\n\n") + "\n\n" }
	tests := []struct {
		name     string
		ct       string
		body     string // ID stands for the request's id
		split    bool   // flush after each event
		want     string // "ok", "rpc" (a JSON-RPC error), "invalid", "none"
		answered bool   // a whole JSON body, or the response, arrived
	}{
		{name: "JSON response", ct: "application/json", body: `{"jsonrpc":"2.0","id":ID,"result":` + replyText + `}`, want: "ok", answered: true},
		{name: "SSE response alone", ct: "text/event-stream", body: sseOf(`event: message` + "\n" + `data: {"jsonrpc":"2.0","id":ID,"result":` + replyText + `}`), want: "ok", answered: true},
		{name: "SSE priming event, progress, then the response in pieces", ct: "text/event-stream", split: true, body: sseOf(
			"id: 0\ndata: ",
			`data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`,
			`data: {"jsonrpc":"2.0","id":ID,`+"\n"+`data: "result":`+replyText+`}`), want: "ok", answered: true},
		{name: "SSE with CRLF line ends", ct: "text/event-stream; charset=utf-8", body: "data: {\"jsonrpc\":\"2.0\",\"id\":ID,\"result\":" + replyText + "}\r\n\r\n", want: "ok", answered: true},
		{name: "JSON-RPC error", ct: "application/json", body: `{"jsonrpc":"2.0","id":ID,"error":{"code":-32602,"message":"unknown tool"}}`, want: "rpc", answered: true},
		{name: "JSON-RPC error over SSE", ct: "text/event-stream", body: sseOf(`data: {"jsonrpc":"2.0","id":ID,"error":{"code":-32603,"message":"boom"}}`), want: "rpc", answered: true},
		{name: "a request from the server", ct: "text/event-stream", body: sseOf(`data: {"jsonrpc":"2.0","id":7,"method":"roots/list"}`), want: "invalid"},
		{name: "the response to another request", ct: "application/json", body: `{"jsonrpc":"2.0","id":1,"result":{}}`, want: "invalid", answered: true},
		{name: "response without result or error", ct: "application/json", body: `{"jsonrpc":"2.0","id":ID}`, want: "invalid", answered: true},
		{name: "not JSON", ct: "application/json", body: `<html>`, want: "invalid", answered: true},
		{name: "not JSON in an event", ct: "text/event-stream", body: sseOf(`data: nope`), want: "invalid"},
		{name: "a body of another type", ct: "text/plain", body: `ok`, want: "invalid"},
		{name: "stream ended before the response", ct: "text/event-stream", body: sseOf(`data: {"jsonrpc":"2.0","method":"notifications/message","params":{}}`), want: "none"},
		{name: "empty stream", ct: "text/event-stream", body: "", want: "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req struct {
					ID     int64  `json:"id"`
					Method string `json:"method"`
					Params struct {
						Name string `json:"name"`
					} `json:"params"`
				}
				raw, _ := io.ReadAll(r.Body)
				if err := json.Unmarshal(raw, &req); err != nil || req.Method != "tools/call" || req.Params.Name != cpex.ToolInvokeHook || req.ID <= firstCallID {
					t.Errorf("request %s", raw)
				}
				for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
					"Mcp-Session-Id": "s-1", "Mcp-Protocol-Version": "2025-11-25"} {
					if got := r.Header.Get(k); got != v {
						t.Errorf("%s: %q, want %q", k, got, v)
					}
				}
				w.Header().Set("Content-Type", tt.ct)
				body := strings.ReplaceAll(tt.body, "ID", strconv.FormatInt(req.ID, 10))
				if !tt.split {
					_, _ = io.WriteString(w, body)
					return
				}
				for _, part := range strings.SplitAfter(body, "\n") {
					_, _ = io.WriteString(w, part)
					w.(http.Flusher).Flush()
				}
			}))
			defer srv.Close()
			rt := newSessionRT(http.DefaultTransport, nil)
			p := &postCaller{client: &http.Client{Transport: rt}, url: srv.URL, session: "s-1", version: "2025-11-25", life: rt.ctx}
			p.ids.Store(firstCallID)
			ctx, ex := withCallRecord(context.Background())
			res, err := p.call(ctx, ex, invokeParams(ctx, cpex.ToolPreInvoke, "p", json.RawMessage(`{}`), &cpex.PluginContext{}))
			var rpc *jsonrpc.Error
			switch tt.want {
			case "ok":
				if err != nil {
					t.Fatal(err)
				}
				reply, err := parseInvokeReply(res)
				if err != nil || reply.Result == nil || !reply.Result.Continue() {
					t.Fatalf("reply %+v, %v", reply, err)
				}
			case "rpc":
				if !errors.As(err, &rpc) || !serverError(err) {
					t.Fatalf("err %v, want a JSON-RPC error", err)
				}
			case "invalid":
				if !errors.Is(err, cpex.ErrInvalidReply) {
					t.Fatalf("err %v, want ErrInvalidReply", err)
				}
			case "none":
				if err == nil || errors.Is(err, cpex.ErrInvalidReply) || serverError(err) {
					t.Fatalf("err %v, want no answer", err)
				}
			}
			if got := ex.answered.Load(); got != tt.answered {
				t.Errorf("answered %v, want %v", got, tt.answered)
			}
		})
	}
}

// TestPostCallerOnlyForSessionsBefore20260728: the calls are made here for
// the protocol versions this package speaks; a session of any other version
// stays with the go-sdk.
func TestPostCallerOnlyForSessionsBefore20260728(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer srv.Close()
	for _, version := range []string{"2025-11-25", "2025-06-18", "2025-03-26", ""} {
		t.Run(version, func(t *testing.T) {
			c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
			cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true},
				&mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			p := newPostCaller(context.Background(), cs, srv.URL, http.DefaultTransport)
			got := cs.InitializeResult().ProtocolVersion
			if want := got < "2026-07-28"; (p != nil) != want {
				t.Fatalf("negotiated %s: caller %v, want %v", got, p != nil, want)
			}
			if p != nil && (p.version != got || p.session != cs.ID() || p.session == "") {
				t.Fatalf("caller %+v for session %q of %s", p, cs.ID(), got)
			}
		})
	}
}

// FuzzReadSSEAnswer: whatever the stream, reading it ends, and what it
// returns is the response to the call.
func FuzzReadSSEAnswer(f *testing.F) {
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n\n"))
	f.Add([]byte("id: 0\ndata: \n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\ndata: {\"id\":5,\n data: \"error\":{\"code\":1}}\n\n"))
	f.Add([]byte("data: {\"id\":\"5\"}\r\n\r\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		msg, err := readSSEAnswer(strings.NewReader(string(stream)), 5)
		if err == nil {
			var id int64
			if json.Unmarshal(msg.ID, &id) != nil || id != 5 {
				t.Fatalf("answer with id %s", msg.ID)
			}
		}
	})
}

// TestPostCallCancelled: a caller that gives up while the server holds the
// answer gets its error without waiting for the answer, and the server a
// notifications/cancelled naming the call.
func TestPostCallCancelled(t *testing.T) {
	started := make(chan int64, 1)
	cancelled := make(chan string, 1)
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     int64           `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &msg)
		if msg.Method == "notifications/cancelled" {
			w.WriteHeader(http.StatusAccepted)
			cancelled <- string(msg.Params)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush() // the answer's headers are in; its event is not
		started <- msg.ID
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	headersIn := make(chan struct{}, 1)
	rt := newSessionRT(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil && resp.Header.Get("Content-Type") == "text/event-stream" {
			headersIn <- struct{}{}
		}
		return resp, err
	}), nil)
	p := &postCaller{client: &http.Client{Transport: rt}, url: srv.URL, session: "s-1", version: "2025-11-25", life: rt.ctx}
	p.ids.Store(firstCallID)
	ctx, cancel := context.WithCancel(context.Background())
	ctx, ex := withCallRecord(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := p.call(ctx, ex, invokeParams(ctx, cpex.ToolPreInvoke, "p", json.RawMessage(`{}`), &cpex.PluginContext{}))
		done <- err
	}()
	id := <-started
	<-headersIn // the body, not the request, is what the caller waits on
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			t.Fatalf("err %v", err)
		}
	case <-time.After(drainGrace / 2):
		t.Fatal("the call waited on after its caller gave up")
	}
	select {
	case params := <-cancelled:
		if want := `"requestId":` + strconv.FormatInt(id, 10); !strings.Contains(params, want) {
			t.Fatalf("notifications/cancelled params %s, want %s", params, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/cancelled")
	}
	rt.retire(errSessionRetired)
	p.close()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestPostCallAnswerBeforeStreamEnds: a server that keeps the answer's
// stream open after the response does not hold up the call: the caller has
// its answer at once and the rest is drained in the background, which
// close waits for.
func TestPostCallAnswerBeforeStreamEnds(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID int64 `json:"id"`
		}
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &req)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":"+strconv.FormatInt(req.ID, 10)+",\"result\":"+replyText+"}\n\n")
		w.(http.Flusher).Flush()
		select { // the stream stays open
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	rt := newSessionRT(http.DefaultTransport, nil)
	p := &postCaller{client: &http.Client{Transport: rt}, url: srv.URL, session: "s-1", version: "2025-11-25", life: rt.ctx}
	p.ids.Store(firstCallID)
	done := make(chan error, 1)
	go func() {
		ctx, ex := withCallRecord(context.Background())
		res, err := p.call(ctx, ex, invokeParams(ctx, cpex.ToolPreInvoke, "p", json.RawMessage(`{}`), &cpex.PluginContext{}))
		if err == nil {
			_, err = parseInvokeReply(res)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(drainTimeout / 2):
		t.Fatal("the call waited for the stream to end")
	}
	close(release)
	p.close()
}
