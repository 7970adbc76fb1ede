package processor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
)

// Protocol edges of stream.go, message by message, with a fake Hooks.

// fakeHooks has the tool hooks; post, if set, decides tool_post_invoke.
type fakeHooks struct {
	post    func(payload json.RawMessage) executor.Outcome
	calls   int
	preOnly bool // no post hook is configured
}

func (f *fakeHooks) Applies(h cpex.HookType) bool {
	return h == cpex.ToolPreInvoke || h == cpex.ToolPostInvoke && !f.preOnly
}

func (f *fakeHooks) Run(_ context.Context, h cpex.HookType, p json.RawMessage, _ *executor.RequestContext, _ executor.Target) executor.Outcome {
	f.calls++
	if h == cpex.ToolPostInvoke && f.post != nil {
		return f.post(p)
	}
	return executor.Outcome{}
}

func (f *fakeHooks) FailClosed(cpex.HookType) bool { return true }

func (f *fakeHooks) Version() uint64 { return 0 } // its answers never change

func (f *fakeHooks) AppliesTo(h cpex.HookType, _ *cpex.GlobalContext, _ executor.Target) bool {
	return f.Applies(h)
}

// rewrite is a post hook replacing every result with {"ok":true}.
func rewrite(json.RawMessage) executor.Outcome {
	return executor.Outcome{Modified: true, Payload: json.RawMessage(`{"name":"t","result":{"ok":true}}`)}
}

func testStream(h Hooks) *stream {
	set := &config.Extproc{MCPPaths: []string{"/mcp"}, MaxBodyBytes: 1 << 20}
	return streamOf(&Snapshot{Settings: set, Hooks: h}, &Options{Logger: zerolog.Nop(), Observer: nopObserver{}, Attribution: attribution.New(attribution.Options{})})
}

// streamOf is a stream of snap with opts, as Process makes one.
func streamOf(snap *Snapshot, opts *Options) *stream {
	return newStream(context.Background(), snap, hookFactsOf(snap), opts, newCanned(), nil)
}

func headerMap(kv ...string) *corev3.HeaderMap {
	hm := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return hm
}

func requestHeaders(method, path string, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
		Headers: headerMap(":method", method, ":path", path, "content-type", "application/json"), EndOfStream: eos}}}
}

func requestBody(body string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{
		Body: []byte(body), EndOfStream: true}}}
}

func responseHeaders(status int, kv ...string) *extprocv3.ProcessingRequest {
	kv = append([]string{":status", strconv.Itoa(status)}, kv...)
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
		Headers: headerMap(kv...)}}}
}

func responseBody(chunk string, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
		Body: []byte(chunk), EndOfStream: eos}}}
}

const toolCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}`

// TestModeOverride: every headers reply carries a mode_override with both
// body modes set to what the stream needs (docs/extproc-contract.md §3.1), and switching a
// response to STREAMED removes content-length (§4).
func TestModeOverride(t *testing.T) {
	type mode struct {
		reqBody, respBody filterv3.ProcessingMode_BodySendMode
		respHeaders       filterv3.ProcessingMode_HeaderSendMode
	}
	const (
		none     = filterv3.ProcessingMode_NONE
		buffered = filterv3.ProcessingMode_BUFFERED
		streamed = filterv3.ProcessingMode_STREAMED
		skip     = filterv3.ProcessingMode_SKIP
		dflt     = filterv3.ProcessingMode_DEFAULT
	)
	inspect := []*extprocv3.ProcessingRequest{requestHeaders("POST", "/mcp", false), requestBody(toolCall)}
	tests := []struct {
		name     string
		msgs     []*extprocv3.ProcessingRequest
		want     mode // of the last reply
		removeCL bool
	}{
		{"POST /mcp", inspect[:1], mode{buffered, none, dflt}, false},
		{"POST /mcp?x=1", []*extprocv3.ProcessingRequest{requestHeaders("POST", "/mcp?x=1", false)}, mode{buffered, none, dflt}, false},
		{"POST /mcp without body", []*extprocv3.ProcessingRequest{requestHeaders("POST", "/mcp", true)}, mode{none, none, skip}, false},
		{"GET /mcp", []*extprocv3.ProcessingRequest{requestHeaders("GET", "/mcp", true)}, mode{none, none, dflt}, false},
		{"GET /MCP/ SSE", []*extprocv3.ProcessingRequest{requestHeaders("GET", "/MCP/", true), responseHeaders(200, "content-type", "text/event-stream", "content-length", "42")}, mode{none, streamed, dflt}, true},
		{"GET /mcp JSON", []*extprocv3.ProcessingRequest{requestHeaders("GET", "/mcp", true), responseHeaders(200, "content-type", "application/json")}, mode{none, buffered, dflt}, false},
		{"GET /mcp 405", []*extprocv3.ProcessingRequest{requestHeaders("GET", "/mcp", true), responseHeaders(405, "content-type", "text/plain")}, mode{none, none, dflt}, false},
		{"GET /other", []*extprocv3.ProcessingRequest{requestHeaders("GET", "/other", true)}, mode{none, none, skip}, false},
		{"DELETE /mcp", []*extprocv3.ProcessingRequest{requestHeaders("DELETE", "/mcp", true)}, mode{none, none, skip}, false},
		{"POST /other", []*extprocv3.ProcessingRequest{requestHeaders("POST", "/other", false)}, mode{none, none, skip}, false},
		{"JSON response", append(inspect, responseHeaders(200, "content-type", "application/json", "content-length", "42")), mode{none, buffered, dflt}, false},
		{"JSON response with charset", append(inspect, responseHeaders(200, "content-type", "application/json; charset=utf-8")), mode{none, buffered, dflt}, false},
		{"SSE response", append(inspect, responseHeaders(200, "content-type", "text/event-stream", "content-length", "42")), mode{none, streamed, dflt}, true},
		{"error status", append(inspect, responseHeaders(500, "content-type", "application/json")), mode{none, none, dflt}, false},
		{"other content type", append(inspect, responseHeaders(200, "content-type", "text/html")), mode{none, none, dflt}, false},
		{"no hooked request", []*extprocv3.ProcessingRequest{requestHeaders("POST", "/mcp", false),
			requestBody(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), responseHeaders(200, "content-type", "application/json")}, mode{none, none, dflt}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := testStream(&fakeHooks{})
			var last *extprocv3.ProcessingResponse
			for _, m := range tt.msgs {
				r := st.handle(m)
				isHeaders := m.GetRequestHeaders() != nil || m.GetResponseHeaders() != nil
				if isHeaders && r.GetModeOverride() == nil {
					t.Fatalf("headers reply without mode_override: %v", r)
				}
				last = r
			}
			o := last.GetModeOverride()
			got := mode{o.GetRequestBodyMode(), o.GetResponseBodyMode(), o.GetResponseHeaderMode()}
			if got != tt.want {
				t.Errorf("mode_override %+v, want %+v", got, tt.want)
			}
			var removed bool
			for _, h := range last.GetResponseHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders() {
				removed = removed || h == "content-length"
			}
			if removed != tt.removeCL {
				t.Errorf("content-length removed: %v, want %v", removed, tt.removeCL)
			}
		})
	}
}

// Replies to a body chunk, as the tests write them.
const (
	pass  = "<unchanged>"
	clear = "<clear>"
)

func replyBody(t *testing.T, r *extprocv3.ProcessingResponse) string {
	t.Helper()
	br := r.GetResponseBody()
	if br == nil {
		t.Fatalf("reply %v is not a response_body reply", r)
	}
	if hm := br.GetResponse().GetHeaderMutation(); hm != nil {
		t.Errorf("header mutation in a STREAMED body reply: %v", hm)
	}
	bm := br.GetResponse().GetBodyMutation()
	switch {
	case bm == nil:
		return pass
	case bm.GetClearBody():
		return clear
	case bm.GetBody() != nil:
		return string(bm.GetBody())
	}
	t.Fatalf("body mutation %v neither sets nor clears the body", bm)
	return ""
}

// TestSSEChunks: what each SSE chunk is answered with.
func TestSSEChunks(t *testing.T) {
	const (
		result    = "event: message\nid: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
		rewritten = "event: message\nid: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"ok\":true}}\n\n"
		progress  = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n"
	)
	type chunk struct {
		body string
		eos  bool
		want string
	}
	tests := []struct {
		name   string
		post   func(json.RawMessage) executor.Outcome
		chunks []chunk
	}{
		{"whole events, unchanged", nil, []chunk{{progress, false, pass}, {result, true, pass}}},
		{"whole event, rewritten", rewrite, []chunk{{progress + result, true, progress + rewritten}}},
		{"part of an event is held", nil, []chunk{{result[:20], false, clear}, {result[20:40], false, clear}, {result[40:], true, result}}},
		{"part held and rewritten", rewrite, []chunk{{progress + result[:30], false, progress}, {result[30:], false, rewritten}, {"", true, pass}}},
		{"held bytes flushed at end_of_stream", nil, []chunk{{progress + result[:30], false, progress}, {result[30 : len(result)-2], true, result[:len(result)-2]}}},
		{"held bytes flushed by an empty last chunk", nil, []chunk{{result[:len(result)-1], false, clear}, {"", true, result[:len(result)-1]}}},
		{"unterminated last event inspected", rewrite, []chunk{{result[:len(result)-2], false, clear}, {"", true, rewritten[:len(rewritten)-2]}}},
		{"unterminated last event in the last chunk", rewrite, []chunk{{progress, false, pass}, {result[:len(result)-1], true, rewritten[:len(rewritten)-1]}}},
		{"blank line split across chunks", rewrite, []chunk{{result[:len(result)-1], false, clear}, {"\n" + progress, true, rewritten + progress}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hooks := &fakeHooks{post: tt.post}
			st := testStream(hooks)
			for _, m := range []*extprocv3.ProcessingRequest{requestHeaders("POST", "/mcp", false), requestBody(toolCall),
				responseHeaders(200, "content-type", "text/event-stream")} {
				st.handle(m)
			}
			for i, c := range tt.chunks {
				got := replyBody(t, st.handle(responseBody(c.body, c.eos)))
				if got != c.want {
					t.Errorf("chunk %d %q: reply %q, want %q", i, c.body, got, c.want)
				}
			}
			if tt.post != nil && hooks.calls != 2 { // pre and post
				t.Errorf("%d hook runs, want 2", hooks.calls)
			}
		})
	}
}

// runSSE feeds an SSE response in chunks through a stream that has a pending
// tools/call with id 1 and returns what the client receives.
func runSSE(t *testing.T, post func(json.RawMessage) executor.Outcome, chunks [][]byte) []byte {
	t.Helper()
	return runSSEOn(t, testStream(&fakeHooks{post: post}), chunks)
}

// runSSEOn is runSSE on st.
func runSSEOn(t *testing.T, st *stream, chunks [][]byte) []byte {
	t.Helper()
	for _, m := range []*extprocv3.ProcessingRequest{requestHeaders("POST", "/mcp", false), requestBody(toolCall),
		responseHeaders(200, "content-type", "text/event-stream")} {
		st.handle(m)
	}
	return feedResponse(t, st, chunks)
}

// feedResponse sends chunks as the response body (the last one ends the
// stream) and returns what the client receives: each chunk as is, cleared
// or replaced, as the replies say.
func feedResponse(t *testing.T, st *stream, chunks [][]byte) []byte {
	t.Helper()
	var out []byte
	for i, c := range chunks {
		switch got := replyBody(t, st.handle(responseBody(string(c), i == len(chunks)-1))); got {
		case pass:
			out = append(out, c...)
		case clear:
		default:
			out = append(out, got...)
		}
	}
	return out
}

// cut splits b at up to 8 offsets taken from the bytes of seed.
func cut(b []byte, seed uint64) [][]byte {
	var at []int
	for k := 0; k < 8 && seed != 0; k++ {
		at = append(at, int(seed&0xff)%(len(b)+1))
		seed >>= 8
	}
	slices.Sort(at)
	var out [][]byte
	prev := 0
	for _, i := range at {
		out = append(out, b[prev:i])
		prev = i
	}
	return append(out, b[prev:])
}

// FuzzStreamedResponse: however an SSE response is cut into chunks, the
// client gets the bytes it would get from one chunk, and exactly the
// server's bytes when no plugin changes anything and results the stream
// cannot attribute pass (under the default policy a result for another id
// than the request's is refused, rightly; the rewritten half covers that).
func FuzzStreamedResponse(f *testing.F) {
	f.Add([]byte("event: message\nid: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"), uint64(0x2814))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\n"), uint64(0x403f3e0a))
	f.Add([]byte("\xef\xbb\xbfdata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\"result\":{}}\r\r: c\n\ndata: [{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}]"), uint64(0x0102030405))
	f.Fuzz(func(t *testing.T, body []byte, seed uint64) {
		chunks := cut(body, seed)
		passing := testStream(&fakeHooks{})
		passing.x.snap.Settings = &config.Extproc{MCPPaths: []string{"/mcp"}, MaxBodyBytes: 1 << 20, UnattributedResponses: config.UnattributedPass}
		if got := runSSEOn(t, passing, chunks); !bytes.Equal(got, body) {
			t.Fatalf("unchanged stream in %d chunks: client got %q, want %q", len(chunks), got, body)
		}
		whole := runSSE(t, rewrite, [][]byte{body})
		if got := runSSE(t, rewrite, chunks); !bytes.Equal(got, whole) {
			t.Fatalf("rewritten stream in chunks %q: client got %q, in one chunk %q", chunks, got, whole)
		}
	})
}

// FuzzRequestBody: whatever a client POSTs to an MCP path, and whatever a
// plugin decides, the body message gets exactly one reply of an allowed kind
// (request_body, or an immediate JSON-RPC answer), never a panic; and a body
// no plugin changed is never rewritten.
func FuzzRequestBody(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}`), uint8(0), "")
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"p","arguments":{"x":"y"}}}]`), uint8(1), "gzip")
	f.Add([]byte(`{"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"uri":"mem://x"}}`), uint8(2), "")
	f.Add([]byte("\xef\xbb\xbf{}"), uint8(3), "br")
	f.Fuzz(func(t *testing.T, body []byte, verdict uint8, encoding string) {
		h := &verdictHooks{verdict: verdict % 4}
		st := testStream(h)
		hdrs := []string{":method", "POST", ":path", "/mcp", "content-type", "application/json"}
		if encoding != "" {
			hdrs = append(hdrs, "content-encoding", encoding)
		}
		first := st.handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
			RequestHeaders: &extprocv3.HttpHeaders{Headers: headerMap(hdrs...)}}})
		if first.GetRequestHeaders() == nil {
			t.Fatalf("request headers answered with %T", first.Response)
		}
		resp := st.handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}})
		switch {
		case resp.GetImmediateResponse() != nil:
			if !bytes.Contains(resp.GetImmediateResponse().GetBody(), []byte(`"jsonrpc":"2.0"`)) {
				t.Fatalf("immediate answer is not JSON-RPC: %s", resp.GetImmediateResponse().GetBody())
			}
		case resp.GetRequestBody() != nil:
			if m := resp.GetRequestBody().GetResponse().GetBodyMutation(); m != nil && h.verdict != verdictModify && encoding == "" {
				t.Fatalf("body rewritten though no plugin changed it: %v", m)
			}
		default:
			t.Fatalf("request body answered with %T", resp.Response)
		}
	})
}

const (
	verdictAllow uint8 = iota
	verdictModify
	verdictBlock
	verdictFail
)

// verdictHooks applies to every pre hook and answers with one verdict.
type verdictHooks struct{ verdict uint8 }

func (v *verdictHooks) Applies(h cpex.HookType) bool { return true }
func (v *verdictHooks) AppliesTo(cpex.HookType, *cpex.GlobalContext, executor.Target) bool {
	return true
}
func (v *verdictHooks) FailClosed(cpex.HookType) bool { return true }
func (v *verdictHooks) Version() uint64               { return 0 }
func (v *verdictHooks) Run(_ context.Context, h cpex.HookType, p json.RawMessage, _ *executor.RequestContext, _ executor.Target) executor.Outcome {
	switch v.verdict {
	case verdictModify:
		return executor.Outcome{Modified: true, Payload: p}
	case verdictBlock:
		return executor.Outcome{Violation: &cpex.PluginViolation{Reason: "r", Description: "d", Code: "C", PluginName: "p"}}
	case verdictFail:
		return executor.Outcome{Err: &executor.PluginError{Plugin: "p", Hook: h, Cause: errors.New("boom")}}
	}
	return executor.Outcome{}
}

// TestSSEOverflowKeepsCompleteEvents: when an event outgrows the inspection
// limit under a fail-closed plugin, the events completed before it in the
// same chunk are still delivered, then an error event for the pending id.
func TestSSEOverflowKeepsCompleteEvents(t *testing.T) {
	st := testStream(&fakeHooks{})
	st.x.snap.Settings.MaxBodyBytes = 256
	for _, m := range []*extprocv3.ProcessingRequest{requestHeaders("POST", "/mcp", false), requestBody(toolCall),
		responseHeaders(200, "content-type", "text/event-stream")} {
		st.handle(m)
	}
	progress := "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n"
	huge := "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"text\":\"" + strings.Repeat("x", 400)
	got := replyBody(t, st.handle(responseBody(progress+huge, false)))
	if !strings.HasPrefix(string(got), progress) {
		t.Fatalf("the complete event before the oversized one was lost: %q", got)
	}
	if !strings.Contains(string(got), `"error"`) || !strings.Contains(string(got), `"id":1`) {
		t.Fatalf("no error event for the pending id: %q", got)
	}
	if strings.Contains(string(got), "xxxx") {
		t.Fatalf("part of the oversized result leaked: %q", got)
	}
}

// TestLogBodies: request bodies reach the log only with the LogBodies
// opt-in at debug level, and credential headers are redacted there.
func TestLogBodies(t *testing.T) {
	const secret = "Bearer s3cret-token"
	run := func(logBodies bool, level zerolog.Level) string {
		var buf bytes.Buffer
		set := &config.Extproc{MCPPaths: []string{"/mcp"}, MaxBodyBytes: 1 << 20}
		st := streamOf(&Snapshot{Settings: set, Hooks: &fakeHooks{}},
			&Options{Logger: zerolog.New(&buf).Level(level), Observer: nopObserver{}, LogBodies: logBodies})
		st.handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
			Headers: headerMap(":method", "POST", ":path", "/mcp", "authorization", secret, "x-api-key", "s3cret-key", "x-tenant", "acme")}}})
		st.handle(requestBody(toolCall))
		return buf.String()
	}
	on := run(true, zerolog.DebugLevel)
	if !strings.Contains(on, `\"name\":\"t\"`) || !strings.Contains(on, "acme") {
		t.Errorf("opted in at debug: body or headers missing from the log:\n%s", on)
	}
	if strings.Contains(on, "s3cret") || !strings.Contains(on, "[redacted]") {
		t.Errorf("credential header not redacted:\n%s", on)
	}
	for _, off := range []string{run(false, zerolog.DebugLevel), run(true, zerolog.InfoLevel)} {
		if strings.Contains(off, `\"name\":\"t\"`) || strings.Contains(off, "s3cret") {
			t.Errorf("body logged without the opt-in at debug:\n%s", off)
		}
	}
}

// TestGETWithoutPostHooks: with no post hook configured, a GET stream costs
// what it always did: one message, no response headers, no body.
func TestGETWithoutPostHooks(t *testing.T) {
	for _, path := range []string{"/mcp", "/mcp/", "/other"} {
		st := testStream(&fakeHooks{preOnly: true})
		r := st.handle(requestHeaders("GET", path, true))
		o := r.GetModeOverride()
		if o.GetResponseHeaderMode() != filterv3.ProcessingMode_SKIP || o.GetRequestBodyMode() != filterv3.ProcessingMode_NONE || o.GetResponseBodyMode() != filterv3.ProcessingMode_NONE {
			t.Errorf("GET %s: mode_override %v, want skip everything", path, o)
		}
	}
}
