package processor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// The response path.

// postGuard has one plugin, "post", on the hooks its server declares.
const postGuard = `
plugins:
  - name: post
    kind: external
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
`

// The requests of the recordings in testdata (ids as recorded).
const (
	progressCall = `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":2,"steps":4},"_meta":{"progressToken":"p-4"}}}`
	promptCall   = `{"jsonrpc":"2.0","id":9,"method":"prompts/get","params":{"name":"args-prompt","arguments":{"city":"Paris","state":"IDF"}}}`
	resourceCall = `{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"uri":"demo://resource/static/document/architecture.md"}}`
	batchCall    = `[{"jsonrpc":"2.0","id":11,"method":"tools/list"},{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"echo","arguments":{"message":"batch"}}}]`
)

// postResult is the result every rewriting post hook of these tests returns.
const postResult = `{"content":[{"text":"[checked]","type":"text"}]}`

// mustReplace replaces old by new in s, once, and fails if old is absent.
func mustReplace(t *testing.T, s, old, new string) string {
	t.Helper()
	if strings.Count(s, old) != 1 {
		t.Fatalf("%q occurs %d times, want once", old, strings.Count(s, old))
	}
	return strings.Replace(s, old, new, 1)
}

func TestResponseJSONModified(t *testing.T) {
	post := plugintest.NewScripted("post", cpex.ToolPostInvoke, cpex.PromptPostFetch, cpex.ResourcePostFetch)
	h := newHarness(t, postGuard, post)
	tests := []struct {
		name, request, field, response, want string
	}{{
		name:     "tool result",
		request:  echoCall,
		field:    "result",
		response: `{"result":{"content":[{"type":"text","text":"Echo: hello"}]},"jsonrpc":"2.0","id":3}`,
		want:     `{"result":` + postResult + `,"jsonrpc":"2.0","id":3}`,
	}, {
		name:     "prompt result",
		request:  promptCall,
		field:    "result",
		response: "{\"jsonrpc\":\"2.0\", \"id\":9,\n \"result\":{\"messages\":[]}}",
		want:     "{\"jsonrpc\":\"2.0\", \"id\":9,\n \"result\":" + postResult + "}",
	}, {
		name:     "resource contents",
		request:  resourceCall,
		field:    "content",
		response: `{"jsonrpc":"2.0","id":10,"result":{"contents":[{"uri":"demo://x","text":"secret"}]}}`,
		want:     `{"jsonrpc":"2.0","id":10,"result":{"contents":[]}}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newValue := postResult
			if tt.field == "content" {
				newValue = `{"contents":[]}`
			}
			post.SetFunc(replaceResult(tt.field, newValue))
			res := doWith(t, &h.filter, mcpPost(tt.request), jsonUpstream(http.StatusOK, tt.response))
			if string(res.Body) != tt.want {
				t.Errorf("client got\n%s\nwant\n%s", res.Body, tt.want)
			}
			if cl := res.Headers.Get("Content-Length"); cl != strconv.Itoa(len(res.Body)) {
				t.Errorf("content-length %q for %d bytes", cl, len(res.Body))
			}
		})
	}
}

func TestResponseJSONUnmodified(t *testing.T) {
	post := plugintest.NewScripted("post", cpex.ToolPostInvoke)
	h := newHarness(t, postGuard, post)
	response := "{ \"id\" : 3 , \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"caf\\u00e9\"}]},\n\"jsonrpc\":\"2.0\"}\n"
	res := h.do(mcpPost(echoCall), jsonUpstream(http.StatusOK, response))
	if string(res.Body) != response {
		t.Errorf("client got\n%q\nwant\n%q", res.Body, response)
	}
	if n := post.CallCount(); n != 1 {
		t.Errorf("post hook called %d times, want 1", n)
	}
	for i, r := range res.Received {
		if bodyMutation(r) != nil {
			t.Errorf("reply %d mutates an unchanged body", i)
		}
	}
}

// split cuts b at the given offsets.
func split(b []byte, at ...int) [][]byte {
	var out [][]byte
	prev := 0
	for _, i := range at {
		out = append(out, b[prev:i])
		prev = i
	}
	return append(out, b[prev:])
}

// TestResponseSSESplits rewrites the result of recorded SSE responses cut
// into two chunks at every byte offset (and into three at many), and expects
// the client to get the recording with only the result replaced: same
// framing, event: and id: lines kept, progress events untouched. The upstream
// also sends a content-length (as some servers do), which the processor must
// drop when it switches to STREAMED.
func TestResponseSSESplits(t *testing.T) {
	post := plugintest.NewScripted("post", cpex.ToolPostInvoke)
	post.SetFunc(replaceResult("result", postResult))
	h := newHarness(t, postGuard, post)
	tests := []struct {
		file, request, result string
		progress              int
	}{
		{"tools-call-echo.http", echoCall, `{"content":[{"type":"text","text":"Echo: hello"}]}`, 0},
		{"tools-call-progress.http", progressCall, `{"content":[{"type":"text","text":"Long running operation completed. Duration: 2 seconds, Steps: 4."}]}`, 4},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			rec := loadHTTP(t, tt.file)
			rec.header.Set("Content-Length", strconv.Itoa(len(rec.body)))
			want := mustReplace(t, string(rec.body), `data: {"result":`+tt.result, `data: {"result":`+postResult)
			if n := strings.Count(want, "notifications/progress"); n != tt.progress {
				t.Fatalf("%d progress events in the recording, want %d", n, tt.progress)
			}
			check := func(at ...int) {
				t.Helper()
				post.Reset()
				res := doWith(t, &h.filter, mcpPost(tt.request), rec.upstream(split(rec.body, at...)...))
				if string(res.Body) != want {
					t.Fatalf("split at %v: client got\n%s\nwant\n%s", at, res.Body, want)
				}
				if res.Headers.Get("Content-Length") != "" {
					t.Fatalf("split at %v: content-length %q kept on a rewritten stream", at, res.Headers.Get("Content-Length"))
				}
				if n := post.CallCount(); n != 1 {
					t.Fatalf("split at %v: post hook called %d times", at, n)
				}
			}
			n := len(rec.body)
			for i := 1; i < n; i++ {
				check(i)
			}
			for i := 1; i < n; i += 41 {
				for j := i + 1; j < n; j += 97 {
					check(i, j)
				}
			}
			// Three chunks around every event boundary.
			for i := 0; i+2 < n; i++ {
				if rec.body[i] == '\n' && rec.body[i+1] == '\n' {
					check(i, i+1, i+2)
				}
			}
		})
	}
}

// TestResponseSSEProgressFlows: the progress events of a long tool call
// reach the client as the server produces them, before the result exists.
func TestResponseSSEProgressFlows(t *testing.T) {
	post := plugintest.NewScripted("post", cpex.ToolPostInvoke)
	post.SetFunc(replaceResult("result", postResult))
	h := newHarness(t, postGuard, post)
	rec := loadHTTP(t, "tools-call-progress.http")
	events := bytes.SplitAfter(rec.body, []byte("\n\n"))
	events = events[:len(events)-1] // the empty rest after the last blank line
	if len(events) != 5 {
		t.Fatalf("%d events in the recording, want 5", len(events))
	}

	up := make(chan []byte)
	seen := make(chan []byte, len(events)+1)
	req := mcpPost(progressCall)
	req.OnResponseChunk = func(c []byte) { seen <- c }
	ctx, cancel := context.WithCancel(context.Background())
	produced := make(chan error, 1)
	go func() {
		defer close(up)
		for i, ev := range events {
			select {
			case up <- ev:
			case <-ctx.Done():
				produced <- fmt.Errorf("exchange ended before event %d was produced", i)
				return
			}
			if i == len(events)-1 {
				break
			}
			// The result is not produced until the progress event reached
			// the client.
			select {
			case got := <-seen:
				if !bytes.Equal(got, ev) {
					produced <- fmt.Errorf("client got %q, want progress event %d %q", got, i, ev)
					return
				}
			case <-ctx.Done():
				produced <- fmt.Errorf("exchange ended before progress event %d reached the client", i)
				return
			case <-time.After(messageTimeout):
				produced <- fmt.Errorf("progress event %d did not reach the client before the next was produced", i)
				return
			}
		}
		produced <- nil
	}()
	res := h.do(req, func(context.Context, *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
		return &envoytest.UpstreamResponse{Status: http.StatusOK, Headers: rec.header.Clone(), Stream: up}, nil
	})
	cancel()
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	want := mustReplace(t, string(rec.body), `{"content":[{"type":"text","text":"Long running operation completed. Duration: 2 seconds, Steps: 4."}]}`, postResult)
	if string(res.Body) != want {
		t.Errorf("client got\n%s\nwant\n%s", res.Body, want)
	}
}

// sseData returns the data of the events of an SSE body (LF line endings,
// one data line per event).
func sseData(body []byte) []string {
	var out []string
	for _, ev := range strings.Split(string(body), "\n\n") {
		for _, line := range strings.Split(ev, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				out = append(out, d)
			}
		}
	}
	return out
}

func TestResponseBlocked(t *testing.T) {
	post := plugintest.NewScripted("post", cpex.ToolPostInvoke)
	post.SetFunc(plugintest.Block(cpex.PluginViolation{Reason: "Leak", Description: "secret in result", Code: "PII", Details: map[string]any{"field": "text"}}))
	h := newHarness(t, postGuard, post)
	wantErr := `{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"Leak: secret in result","data":{"plugin":"post","code":"PII","details":{"field":"text"}}}}`

	t.Run("JSON", func(t *testing.T) {
		res := h.do(mcpPost(echoCall), jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"secret"}]}}`))
		if !jsonEqual(t, res.Body, []byte(wantErr)) {
			t.Errorf("client got\n%s\nwant\n%s", res.Body, wantErr)
		}
		if cl := res.Headers.Get("Content-Length"); cl != strconv.Itoa(len(res.Body)) {
			t.Errorf("content-length %q for %d bytes", cl, len(res.Body))
		}
		if res.Status != http.StatusOK || strings.Contains(string(res.Body), "secret\"") {
			t.Errorf("status %d body %s", res.Status, res.Body)
		}
	})

	t.Run("SSE", func(t *testing.T) {
		rec := loadHTTP(t, "tools-call-echo.http")
		body := rec.body
		res := h.do(mcpPost(echoCall), rec.upstream(body[:30], body[30:]))
		prefix := "event: message\nid: a05ce13c-e129-426f-969a-11c09be63100\ndata: "
		if !strings.HasPrefix(string(res.Body), prefix) || !strings.HasSuffix(string(res.Body), "}\n\n") {
			t.Fatalf("client got %q: framing not kept", res.Body)
		}
		data := sseData(res.Body)
		if len(data) != 1 || !jsonEqual(t, []byte(data[0]), []byte(wantErr)) {
			t.Errorf("event data %q, want %s", data, wantErr)
		}
	})
}

func TestResponseBatch(t *testing.T) {
	post := plugintest.NewScripted("post", cpex.ToolPostInvoke)
	// The result names the tool of the request with the same id.
	post.SetFunc(func(_ context.Context, _ cpex.HookType, p json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		var pl cpex.ToolPostInvokePayload
		if err := json.Unmarshal(p, &pl); err != nil {
			return nil, err
		}
		return pluginserver.Modify("", map[string]any{"name": pl.Name, "result": map[string]any{"content": []any{map[string]string{"type": "text", "text": "post:" + pl.Name}}}})
	})
	h := newHarness(t, postGuard, post)

	t.Run("JSON array, out of order", func(t *testing.T) {
		request := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha"}},` +
			`{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"beta"}},` +
			`{"jsonrpc":"2.0","id":3,"method":"tools/list"}]`
		response := `[{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}, {"jsonrpc":"2.0","id":"b","result":{"content":[]}},` + "\n" +
			`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}]`
		want := `[{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}, {"jsonrpc":"2.0","id":"b","result":{"content":[{"text":"post:beta","type":"text"}]}},` + "\n" +
			`{"jsonrpc":"2.0","id":1,"result":{"content":[{"text":"post:alpha","type":"text"}]}}]`
		res := h.do(mcpPost(request), jsonUpstream(http.StatusOK, response))
		if string(res.Body) != want {
			t.Errorf("client got\n%s\nwant\n%s", res.Body, want)
		}
	})

	t.Run("SSE, one event per element (recorded)", func(t *testing.T) {
		rec := loadHTTP(t, "batch.http")
		want := mustReplace(t, string(rec.body), `{"result":{"content":[{"type":"text","text":"Echo: batch"}]}`,
			`{"result":{"content":[{"text":"post:echo","type":"text"}]}`)
		res := h.do(mcpPost(batchCall), rec.upstream(split(rec.body, 100, len(rec.body)-50)...))
		if string(res.Body) != want {
			t.Errorf("client got\n%s\nwant\n%s", res.Body, want)
		}
	})
}

// TestResponseSSEOtherMessages: in the stream of a hooked call, the
// response to that call's id is inspected; server requests (even one reusing
// the id), notifications, comments, non-JSON data and a second response to
// the same id pass unchanged; responses to ids of no request this sidecar
// knows (no session here) are refused (unattributed_responses: refuse).
func TestResponseSSEOtherMessages(t *testing.T) {
	post := plugintest.NewScripted("post", cpex.ToolPostInvoke)
	post.SetFunc(replaceResult("result", postResult))
	h := newHarness(t, postGuard, post)
	others := []string{
		"event: message\nid: e1\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[]}}\n\n",
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n",
		"data: {\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{\"content\":[]}}\n\n",
		": keep-alive\n\n",
		"event: ping\ndata: not json\n\n",
		"data: {\"jsonrpc\":\"2.0\",\"id\":\"3\",\"result\":{\"content\":[]}}\n\n",
	}
	result := "event: message\r\nid: e7\r\ndata: {\"result\":{\"content\":[]},\"jsonrpc\":\"2.0\",\"id\":3}\r\n\r\n"
	again := "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[]}}\n\n"
	stream := strings.Join(others, "") + result + again
	unknown := func(id string) string {
		return "data: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"error\":{\"code\":-32603,\"message\":\"mcp-extproc: this result cannot be matched to its request, so its post hooks cannot run; not forwarded\"}}\n\n"
	}
	refused := []string{others[0], others[1], unknown("99"), others[3], others[4], unknown(`"3"`)}
	want := strings.Join(refused, "") + "event: message\r\nid: e7\r\ndata: {\"result\":" + postResult + ",\"jsonrpc\":\"2.0\",\"id\":3}\r\n\r\n" + again
	for _, at := range [][]int{nil, {len(stream) / 2}, {17, 200, len(stream) - 3}} {
		post.Reset()
		res := h.do(mcpPost(echoCall), sseUpstream(split([]byte(stream), at...)...))
		if string(res.Body) != want {
			t.Errorf("split at %v: client got\n%q\nwant\n%q", at, res.Body, want)
		}
		if n := post.CallCount(); n != 1 {
			t.Errorf("split at %v: post hook called %d times, want 1", at, n)
		}
	}
}

// TestResponseGETStream: while a post hook is configured, the standalone GET
// stream is read event by event: each complete event reaches the client as
// it is produced, notifications pass, and a response the sidecar cannot
// attribute is refused with an error event for its id, keeping its event id.
func TestResponseGETStream(t *testing.T) {
	post := plugintest.NewScripted("post")
	post.SetFunc(replaceResult("result", postResult))
	h := newHarness(t, postGuard, post)
	chunks := [][]byte{
		[]byte("event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n"),
		[]byte("id: 2\ndata: {}\n\n"), // a replayed priming event (TypeScript SDK)
		[]byte("id: 3\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[]}}\n\n"),
	}
	want := [][]byte{chunks[0], chunks[1],
		[]byte("id: 3\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32603,\"message\":\"mcp-extproc: this result cannot be matched to its request, so its post hooks cannot run; not forwarded\"}}\n\n")}
	up := make(chan []byte)
	seen := make(chan []byte, len(chunks))
	ctx, cancel := context.WithCancel(context.Background())
	produced := make(chan error, 1)
	go func() {
		defer close(up)
		for i, c := range chunks {
			select {
			case up <- c:
			case <-ctx.Done():
				produced <- errors.New("exchange ended early")
				return
			}
			select {
			case got := <-seen:
				if !bytes.Equal(got, want[i]) {
					produced <- fmt.Errorf("chunk %d: client got %q, want %q", i, got, want[i])
					return
				}
			case <-ctx.Done():
				produced <- fmt.Errorf("exchange ended before chunk %d reached the client", i)
				return
			case <-time.After(messageTimeout):
				produced <- fmt.Errorf("chunk %d did not reach the client before the next was produced", i)
				return
			}
		}
		produced <- nil
	}()
	req := &envoytest.Request{Method: http.MethodGet, Path: "/mcp", Headers: http.Header{"Accept": {"text/event-stream"}, "Mcp-Session-Id": {"s-1"}},
		OnResponseChunk: func(c []byte) { seen <- c }}
	h.do(req, func(context.Context, *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
		return &envoytest.UpstreamResponse{Status: http.StatusOK, Headers: http.Header{"Content-Type": {"text/event-stream"}}, Stream: up}, nil
	})
	cancel()
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if n := post.CallCount(); n != 0 {
		t.Errorf("plugin called %d times", n)
	}
}

// TestResponseContextCarried: what a plugin stores in its pre hook reaches
// its post hook of the same request.
func TestResponseContextCarried(t *testing.T) {
	plug := plugintest.NewScripted("post", cpex.ToolPreInvoke, cpex.ToolPostInvoke)
	plug.SetFunc(onHook(cpex.ToolPreInvoke, func(_ context.Context, _ cpex.HookType, _ json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		out := *pctx
		out.State = map[string]any{"scan_id": "s-77"}
		out.GlobalContext.State = map[string]any{"risk": "low"}
		r := pluginserver.Continue("")
		r.Context = &out
		return r, nil
	}))
	h := newHarness(t, postGuard, plug)
	for _, up := range map[string]envoytest.Upstream{
		"JSON": jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`),
		"SSE":  sseUpstream([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[]}}\n\n")),
	} {
		plug.Reset()
		h.do(mcpPost(echoCall, "X-Request-Id", "r-1"), up)
		calls := plug.Calls()
		if len(calls) != 2 || calls[1].Hook != cpex.ToolPostInvoke {
			t.Fatalf("calls %v, want pre then post", calls)
		}
		pc := calls[1].Context
		if pc.State["scan_id"] != "s-77" || pc.GlobalContext.State["risk"] != "low" || pc.GlobalContext.RequestID != "r-1" {
			t.Errorf("post hook context %+v, want the state stored by the pre hook", pc)
		}
	}
}

// TestResponseTooLarge: a response over max_body_bytes cannot be inspected:
// fail closed answers the call with a JSON-RPC error, fail open passes it
// unchanged; never a truncated body.
func TestResponseTooLarge(t *testing.T) {
	config := func(onError string) string {
		return fmt.Sprintf(`
plugins:
  - name: post
    kind: external
    on_error: %s
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
extproc:
  max_body_bytes: 300
`, onError)
	}
	big := `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 500) + `"}]}}`
	progress := "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n"
	sse := []byte(progress + "event: message\nid: 9\ndata: " + big + "\n\n")
	// Cut so that the big event is held, then overflows mid-way.
	sseChunks := split(sse, len(progress)+100, len(progress)+350, len(sse)-20)

	for _, onError := range []string{"fail", "ignore"} {
		t.Run(onError, func(t *testing.T) {
			post := plugintest.NewScripted("post", cpex.ToolPostInvoke)
			post.SetFunc(replaceResult("result", postResult))
			h := newHarness(t, config(onError), post)

			res := h.do(mcpPost(echoCall), jsonUpstream(http.StatusOK, big))
			if onError == "ignore" {
				if string(res.Body) != big {
					t.Errorf("JSON: fail open changed the body: %.200s", res.Body)
				}
			} else {
				if !bytes.HasPrefix(res.Body, []byte(`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,`)) {
					t.Errorf("JSON: client got %.300s, want a JSON-RPC error for id 3", res.Body)
				}
				if cl := res.Headers.Get("Content-Length"); cl != strconv.Itoa(len(res.Body)) {
					t.Errorf("content-length %q for %d bytes", cl, len(res.Body))
				}
			}

			res = h.do(mcpPost(echoCall), sseUpstream(sseChunks...))
			if onError == "ignore" {
				if !bytes.Equal(res.Body, sse) {
					t.Errorf("SSE: fail open changed the stream:\n%q\nwant\n%q", res.Body, sse)
				}
			} else {
				data := sseData(res.Body)
				if !strings.HasPrefix(string(res.Body), progress) || len(data) != 2 ||
					!strings.HasPrefix(data[1], `{"jsonrpc":"2.0","id":3,"error":{"code":-32603,`) || !strings.HasSuffix(string(res.Body), "}\n\n") {
					t.Errorf("SSE: client got\n%q\nwant the progress event, then an error event for id 3", res.Body)
				}
			}
			if n := post.CallCount(); n != 0 {
				t.Errorf("plugin called %d times on a body it cannot be given", n)
			}
		})
	}
}

// TestResponseNotInspected: error statuses, other content types and bodiless
// answers are not read.
func TestResponseNotInspected(t *testing.T) {
	post := plugintest.NewScripted("post", cpex.ToolPostInvoke)
	post.SetFunc(replaceResult("result", postResult))
	h := newHarness(t, postGuard, post)
	result := `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`
	tests := []struct {
		name string
		up   envoytest.Upstream
	}{
		{"500 JSON", jsonUpstream(http.StatusInternalServerError, result)},
		{"404 JSON", jsonUpstream(http.StatusNotFound, `{"jsonrpc":"2.0","id":3,"error":{"code":-32001,"message":"Session not found"}}`)},
		{"200 text/plain", func(context.Context, *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
			return &envoytest.UpstreamResponse{Status: 200, Headers: http.Header{"Content-Type": {"text/plain"}}, Body: [][]byte{[]byte(result)}}, nil
		}},
		{"202 no body", func(context.Context, *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
			return &envoytest.UpstreamResponse{Status: http.StatusAccepted}, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			post.Reset()
			res := doWith(t, &h.filter, mcpPost(echoCall), tt.up)
			if got := strings.Join(kinds(res.Sent), ","); got != "request_headers,request_body,response_headers" {
				t.Errorf("Envoy sent %s", got)
			}
			if n := post.CallCount(); n != 0 {
				t.Errorf("plugin called %d times", n)
			}
		})
	}
}
