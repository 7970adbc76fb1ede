package envoytest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	NONE     = filterv3.ProcessingMode_NONE
	STREAMED = filterv3.ProcessingMode_STREAMED
	BUFFERED = filterv3.ProcessingMode_BUFFERED
	PARTIAL  = filterv3.ProcessingMode_BUFFERED_PARTIAL
	SEND     = filterv3.ProcessingMode_SEND
	SKIP     = filterv3.ProcessingMode_SKIP
)

func post(chunks ...string) *Request {
	r := &Request{Method: http.MethodPost, Path: "/mcp", Authority: "mcp.example", Headers: http.Header{}}
	n := 0
	for _, c := range chunks {
		r.Body = append(r.Body, []byte(c))
		n += len(c)
	}
	if len(chunks) > 0 {
		r.Headers.Set("Content-Type", "application/json")
		r.Headers.Set("Content-Length", strconv.Itoa(n))
	}
	return r
}

// The first message on the wire, exactly: pseudo-headers then sorted
// lower-case headers, values in raw_value only, protocol_config attached.
func TestFirstMessageOnTheWire(t *testing.T) {
	res := do(t, Filter{Mode: bothBodies(BUFFERED, NONE)}, passAll,
		&Request{Method: "POST", Path: "/mcp?x=1", Authority: "mcp.example",
			Headers: http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json", "text/event-stream"}, "Content-Length": {"2"}},
			Body:    [][]byte{[]byte("{}")}},
		canned(200, nil))
	want := &extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
			Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
				{Key: ":authority", RawValue: []byte("mcp.example")},
				{Key: ":path", RawValue: []byte("/mcp?x=1")},
				{Key: ":method", RawValue: []byte("POST")},
				{Key: ":scheme", RawValue: []byte("http")},
				{Key: "accept", RawValue: []byte("application/json")},
				{Key: "accept", RawValue: []byte("text/event-stream")},
				{Key: "content-length", RawValue: []byte("2")},
				{Key: "content-type", RawValue: []byte("application/json")},
			}},
		}},
		ProtocolConfig: &extprocv3.ProtocolConfiguration{RequestBodyMode: BUFFERED, ResponseBodyMode: NONE},
	}
	if diff := cmp.Diff(want, res.Sent[0], protocmp.Transform()); diff != "" {
		t.Errorf("first message (-want +got):\n%s", diff)
	}
	if res.Sent[1].GetProtocolConfig() != nil {
		t.Errorf("protocol_config repeated on the second message")
	}
}

// Envoy's message order for each processing mode.
func TestMessageOrder(t *testing.T) {
	streamUp := func(context.Context, *UpstreamRequest) (*UpstreamResponse, error) {
		ch := make(chan []byte, 2)
		ch <- []byte("x")
		ch <- []byte("yz")
		close(ch)
		return &UpstreamResponse{Status: 200, Stream: ch}, nil
	}
	tests := []struct {
		name string
		mode *filterv3.ProcessingMode
		req  *Request
		up   Upstream
		want []string
	}{
		{"default GET", nil, &Request{}, canned(200, nil, "ok"),
			[]string{"request_headers eos", "response_headers"}},
		{"default GET, empty response", nil, &Request{}, canned(204, nil),
			[]string{"request_headers eos", "response_headers eos"}},
		{"default POST", nil, post("ab"), canned(200, nil, "ok"),
			[]string{"request_headers", "response_headers"}},
		{"buffered", bothBodies(BUFFERED, BUFFERED), post("a", "b"), canned(200, nil, "x", "yz"),
			[]string{"request_headers", `request_body "ab" eos`, "response_headers", `response_body "xyz" eos`}},
		{"streamed", bothBodies(STREAMED, STREAMED), post("a", "b"), canned(200, nil, "x", "yz"),
			[]string{"request_headers", `request_body "a"`, `request_body "b" eos`, "response_headers",
				`response_body "x"`, `response_body "yz" eos`}},
		{"streamed from a live upstream ends with an empty chunk", bothBodies(NONE, STREAMED), post("a"), streamUp,
			[]string{"request_headers", "response_headers", `response_body "x"`, `response_body "yz"`, `response_body "" eos`}},
		{"buffered partial", bothBodies(PARTIAL, NONE), post("a", "b"), canned(200, nil, "x"),
			[]string{"request_headers", `request_body "ab" eos`, "response_headers"}},
		{"headers skipped", &filterv3.ProcessingMode{RequestHeaderMode: SKIP, ResponseHeaderMode: SKIP, RequestBodyMode: BUFFERED, ResponseBodyMode: BUFFERED},
			post("ab"), canned(200, nil, "xyz"),
			[]string{`request_body "ab" eos`, `response_body "xyz" eos`}},
		{"trailers sent after a body", &filterv3.ProcessingMode{RequestBodyMode: BUFFERED, RequestTrailerMode: SEND, ResponseTrailerMode: SEND},
			post("ab"), canned(200, nil, "x"),
			[]string{"request_headers", `request_body "ab" eos`, "request_trailers", "response_headers", "response_trailers"}},
		{"nothing to send", &filterv3.ProcessingMode{RequestHeaderMode: SKIP, ResponseHeaderMode: SKIP},
			post("ab"), canned(200, nil, "x"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := do(t, Filter{Mode: tt.mode}, passAll, tt.req, tt.up)
			if diff := cmp.Diff(tt.want, summary(res.Sent)); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if res.LocalError != "" || res.StreamOpened != (len(tt.want) > 0) {
				t.Errorf("LocalError %q (%s), StreamOpened %v", res.LocalError, res.Details, res.StreamOpened)
			}
			if res.StreamOpened && res.StreamErr != nil {
				t.Errorf("StreamErr = %v, want a clean end", res.StreamErr)
			}
		})
	}
}

// Every violation of the reply rule, with and without failure_mode_allow.
func TestReplyRule(t *testing.T) {
	hang := func(req *extprocv3.ProcessingRequest) step { return step{hang: true} }
	wrongOneof := func(req *extprocv3.ProcessingRequest) step {
		return reply(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
			ResponseHeaders: &extprocv3.HeadersResponse{}}})
	}
	twice := func(req *extprocv3.ProcessingRequest) step { return reply(pass(req), pass(req)) }
	extraAtEnd := func(req *extprocv3.ProcessingRequest) step {
		if req.GetResponseHeaders() != nil {
			return reply(pass(req), pass(req))
		}
		return passAll(req)
	}
	empty := func(req *extprocv3.ProcessingRequest) step { return reply(&extprocv3.ProcessingResponse{}) }
	grpcErr := func(req *extprocv3.ProcessingRequest) step {
		return step{end: true, err: status.Error(codes.Internal, "boom")}
	}
	cleanEOF := func(req *extprocv3.ProcessingRequest) step { return step{end: true} }
	streamedResponse := func(req *extprocv3.ProcessingRequest) step {
		return reply(answer(req, &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
			Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{Body: []byte("x")}}}}))
	}
	tests := []struct {
		name      string
		fn        func(*extprocv3.ProcessingRequest) step
		timeout   time.Duration
		allow     bool
		status    int
		local     string
		upstream  bool // the request reached the upstream
		failedOpn bool
		reset     bool // the error came after the response headers went out
		noBody    bool // the upstream answers without a body
	}{
		{"missing reply", hang, 20 * time.Millisecond, false, 504, LocalTimeout, false, false, false, false},
		{"missing reply, failure_mode_allow", hang, 20 * time.Millisecond, true, 200, "", true, true, false, false},
		{"wrong oneof", wrongOneof, 0, false, 500, LocalSpurious, false, false, false, false},
		{"wrong oneof, failure_mode_allow", wrongOneof, 0, true, 200, "", true, true, false, false},
		{"extra reply mid-stream", twice, 0, false, 500, LocalSpurious, true, false, false, false},
		// After processing finished a reply is dropped, never spurious.
		{"extra reply after the last one", extraAtEnd, 0, false, 200, "", true, false, false, true},
		{"extra reply after the last one, body streaming", extraAtEnd, 0, false, 200, "", true, false, false, false},
		{"reply without a response", empty, 0, false, 500, LocalSpurious, false, false, false, false},
		{"streamed_response outside full duplex", streamedResponse, 0, false, 500, LocalSpurious, false, false, false, false},
		{"gRPC error", grpcErr, 0, false, 500, LocalGRPCError, false, false, false, false},
		{"gRPC error, failure_mode_allow", grpcErr, 0, true, 200, "", true, true, false, false},
		{"clean end of stream", cleanEOF, 0, false, 200, "", true, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := canned(200, nil, "ok")
			if tt.noBody {
				up = canned(200, nil)
			}
			res := do(t, Filter{MessageTimeout: tt.timeout, FailureModeAllow: tt.allow}, tt.fn, &Request{}, up)
			if res.Status != tt.status || res.LocalError != tt.local || res.FailedOpen != tt.failedOpn || res.Reset != tt.reset {
				t.Errorf("got status %d, LocalError %q (%s), FailedOpen %v, Reset %v; want %d, %q, %v, %v",
					res.Status, res.LocalError, res.Details, res.FailedOpen, res.Reset, tt.status, tt.local, tt.failedOpn, tt.reset)
			}
			if (res.UpstreamRequest != nil) != tt.upstream {
				t.Errorf("upstream reached = %v, want %v", res.UpstreamRequest != nil, tt.upstream)
			}
			if tt.status == 200 && !tt.noBody && string(res.Body) != "ok" {
				t.Errorf("body = %q, want the unprocessed upstream body", res.Body)
			}
		})
	}
}

// A timeout on a STREAMED chunk after the headers went out can only reset.
// The chunk is the first message on the stream, so no other reply races the
// short timeout.
func TestTimeoutAfterHeadersResets(t *testing.T) {
	hang := func(req *extprocv3.ProcessingRequest) step { return step{hang: true} }
	mode := &filterv3.ProcessingMode{RequestHeaderMode: SKIP, ResponseHeaderMode: SKIP, ResponseBodyMode: STREAMED}
	res := do(t, Filter{Mode: mode, MessageTimeout: 20 * time.Millisecond}, hang, &Request{}, canned(200, nil, "one", "two"))
	if !res.Reset || res.LocalError != LocalTimeout || res.Status != 200 || len(res.Body) != 0 {
		t.Errorf("got Reset %v, LocalError %q, status %d, body %q", res.Reset, res.LocalError, res.Status, res.Body)
	}
	if diff := cmp.Diff([]string{`response_body "one"`}, summary(res.Sent)); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

func TestOverrideMessageTimeout(t *testing.T) {
	fn := func(req *extprocv3.ProcessingRequest) step {
		return reply(&extprocv3.ProcessingResponse{OverrideMessageTimeout: durationpb.New(time.Second)}, pass(req))
	}
	for _, max := range []time.Duration{0, generous} {
		res := do(t, Filter{MaxMessageTimeout: max}, fn, &Request{}, canned(200, nil, "ok"))
		if res.Status != 200 || res.LocalError != "" {
			t.Errorf("max %v: status %d, LocalError %q (%s)", max, res.Status, res.LocalError, res.Details)
		}
		if got := hasNote(res, "max_message_timeout not set"); got != (max == 0) {
			t.Errorf("max %v: note about the ignored override = %v", max, got)
		}
	}
}

func TestHeaderMutations(t *testing.T) {
	mutateRequest := func(hm *extprocv3.HeaderMutation, st extprocv3.CommonResponse_ResponseStatus) func(*extprocv3.ProcessingRequest) step {
		return func(req *extprocv3.ProcessingRequest) step {
			if req.GetRequestHeaders() != nil {
				return reply(answer(req, &extprocv3.CommonResponse{HeaderMutation: hm, Status: st}))
			}
			return passAll(req)
		}
	}
	valueOnly := &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "x-a", Value: "v"}}
	both := &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "x-a", Value: "v", RawValue: []byte("v")}}
	appendB := setRaw("x-list", "b")
	appendB.Append = boolValue(true)
	tests := []struct {
		name     string
		hm       *extprocv3.HeaderMutation
		status   extprocv3.CommonResponse_ResponseStatus
		strict   bool
		local    string
		want     http.Header // upstream headers checked
		path     string
		method   string
		rejected []string
	}{
		{name: "raw_value applied, overwrite by default",
			hm:   headerMutation([]*corev3.HeaderValueOption{setRaw("x-list", "b"), setRaw("x-new", "n")}),
			want: http.Header{"X-List": {"b"}, "X-New": {"n"}}},
		{name: "append true adds an entry",
			hm:   headerMutation([]*corev3.HeaderValueOption{appendB}),
			want: http.Header{"X-List": {"a", "b"}}},
		{name: "remove", hm: headerMutation(nil, "x-list"), want: http.Header{"X-List": nil}},
		{name: "value only fails", hm: headerMutation([]*corev3.HeaderValueOption{valueOnly}), local: LocalInvalidMutation},
		{name: "value and raw_value fails", hm: headerMutation([]*corev3.HeaderValueOption{both}), local: LocalInvalidMutation},
		{name: "invalid value fails", hm: headerMutation([]*corev3.HeaderValueOption{setRaw("x-a", "a\nb")}), local: LocalInvalidMutation},
		{name: "routing and x-envoy headers ignored",
			hm: headerMutation([]*corev3.HeaderValueOption{setRaw(":authority", "evil"), setRaw("host", "evil"),
				setRaw(":method", "DELETE"), setRaw("x-envoy-foo", "1")}, ":path", "x-envoy-bar"),
			want: http.Header{"X-Envoy-Foo": nil}, path: "/mcp", method: "POST",
			rejected: []string{"remove :path", "remove x-envoy-bar", "set :authority", "set host", "set :method", "set x-envoy-foo"}},
		{name: "disallow_is_error fails", hm: headerMutation([]*corev3.HeaderValueOption{setRaw("x-envoy-foo", "1")}),
			strict: true, local: LocalInvalidMutation},
		{name: ":path may change", hm: headerMutation([]*corev3.HeaderValueOption{setRaw(":path", "/other")}), path: "/other"},
		{name: ":method may change with CONTINUE_AND_REPLACE",
			hm:     headerMutation([]*corev3.HeaderValueOption{setRaw(":method", "PUT")}),
			status: extprocv3.CommonResponse_CONTINUE_AND_REPLACE, method: "PUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := post()
			req.Headers.Add("X-List", "a")
			res := do(t, Filter{DisallowIsError: tt.strict, FailureModeAllow: true}, mutateRequest(tt.hm, tt.status), req, canned(200, nil))
			if res.LocalError != tt.local {
				t.Fatalf("LocalError = %q (%s), want %q", res.LocalError, res.Details, tt.local)
			}
			if tt.local != "" {
				if res.Status != 500 || res.UpstreamRequest != nil {
					t.Errorf("status %d, upstream reached %v; want 500 before the upstream (even with failure_mode_allow)",
						res.Status, res.UpstreamRequest != nil)
				}
				return
			}
			for k, v := range tt.want {
				if got := res.UpstreamRequest.Headers[k]; !slices.Equal(got, v) {
					t.Errorf("upstream %s = %q, want %q", k, got, v)
				}
			}
			if tt.path != "" && res.UpstreamRequest.Path != tt.path {
				t.Errorf("upstream path = %q, want %q", res.UpstreamRequest.Path, tt.path)
			}
			if tt.method != "" && res.UpstreamRequest.Method != tt.method {
				t.Errorf("upstream method = %q, want %q", res.UpstreamRequest.Method, tt.method)
			}
			if res.UpstreamRequest.Authority != "mcp.example" {
				t.Errorf("authority = %q", res.UpstreamRequest.Authority)
			}
			if diff := cmp.Diff(tt.rejected, res.RejectedMutations); diff != "" {
				t.Errorf("rejected mutations (-want +got):\n%s", diff)
			}
		})
	}
}

// §4: in BUFFERED with headers SEND, content-length must match the mutated body.
func TestBufferedContentLength(t *testing.T) {
	const orig, changed = `{"id":1}`, `{"id":1,"redacted":true}`
	rewrite := func(setCL bool) func(*extprocv3.ProcessingRequest) step {
		return func(req *extprocv3.ProcessingRequest) step {
			if req.GetResponseBody() == nil {
				return passAll(req)
			}
			cr := &extprocv3.CommonResponse{BodyMutation: bodyTo(changed)}
			if setCL {
				cr.HeaderMutation = headerMutation([]*corev3.HeaderValueOption{setRaw("content-length", strconv.Itoa(len(changed)))})
			}
			return reply(answer(req, cr))
		}
	}
	tests := []struct {
		name    string
		mode    *filterv3.ProcessingMode
		setCL   bool
		status  int
		local   string
		wantCL  string
		allowed bool
	}{
		{"mutated without content-length", bothBodies(NONE, BUFFERED), false, 500, LocalContentLengthMismatch, "", true},
		{"content-length set in the same reply", bothBodies(NONE, BUFFERED), true, 200, "", strconv.Itoa(len(changed)), false},
		{"headers skipped: Envoy drops content-length itself",
			&filterv3.ProcessingMode{ResponseHeaderMode: SKIP, ResponseBodyMode: BUFFERED}, false, 200, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// failure_mode_allow does not help: this is not a stream error.
			res := do(t, Filter{Mode: tt.mode, FailureModeAllow: tt.allowed}, rewrite(tt.setCL), &Request{},
				canned(200, jsonHeaders(orig), orig))
			if res.Status != tt.status || res.LocalError != tt.local {
				t.Fatalf("status %d, LocalError %q (%s); want %d, %q", res.Status, res.LocalError, res.Details, tt.status, tt.local)
			}
			if tt.status == 200 {
				if string(res.Body) != changed || res.Headers.Get("Content-Length") != tt.wantCL {
					t.Errorf("body %q, content-length %q; want %q, %q", res.Body, res.Headers.Get("Content-Length"), changed, tt.wantCL)
				}
			}
		})
	}
}

// §3.1: an override with only response_body_mode turns the request body off.
func TestModeOverrideBodyModesAreLiteral(t *testing.T) {
	override := func(mo *filterv3.ProcessingMode) func(*extprocv3.ProcessingRequest) step {
		return func(req *extprocv3.ProcessingRequest) step {
			r := pass(req)
			if req.GetRequestHeaders() != nil {
				r.ModeOverride = mo
			}
			return reply(r)
		}
	}
	tests := []struct {
		name  string
		allow bool
		mo    *filterv3.ProcessingMode
		want  []string
	}{
		{"only response_body_mode set", true, &filterv3.ProcessingMode{ResponseBodyMode: BUFFERED},
			[]string{"request_headers", "response_headers", `response_body "ok" eos`}},
		{"both body modes set", true, bothBodies(BUFFERED, BUFFERED),
			[]string{"request_headers", `request_body "{}" eos`, "response_headers", `response_body "ok" eos`}},
		{"DEFAULT header mode keeps the configured one", true, &filterv3.ProcessingMode{RequestBodyMode: BUFFERED, ResponseHeaderMode: filterv3.ProcessingMode_DEFAULT},
			[]string{"request_headers", `request_body "{}" eos`, "response_headers"}},
		{"response headers skipped by override", true, &filterv3.ProcessingMode{RequestBodyMode: BUFFERED, ResponseHeaderMode: SKIP},
			[]string{"request_headers", `request_body "{}" eos`}},
		{"ignored without allow_mode_override", false, &filterv3.ProcessingMode{ResponseBodyMode: BUFFERED},
			[]string{"request_headers", `request_body "{}" eos`, "response_headers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := do(t, Filter{Mode: bothBodies(BUFFERED, NONE), AllowModeOverride: tt.allow}, override(tt.mo),
				post("{}"), canned(200, nil, "ok"))
			if diff := cmp.Diff(tt.want, summary(res.Sent)); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if string(res.UpstreamRequest.Body) != "{}" || res.Status != 200 {
				t.Errorf("upstream body %q, status %d", res.UpstreamRequest.Body, res.Status)
			}
		})
	}
}

func TestModeOverrideUnsupported(t *testing.T) {
	fn := func(req *extprocv3.ProcessingRequest) step {
		r := pass(req)
		r.ModeOverride = bothBodies(filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, NONE)
		return reply(r)
	}
	f := Filter{Client: Serve(t, &scripted{fn: fn}), AllowModeOverride: true, MessageTimeout: generous}
	if _, err := f.Do(context.Background(), &Request{}, canned(200, nil)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("override to FULL_DUPLEX_STREAMED: err = %v, want ErrUnsupported", err)
	}
	f.Mode = bothBodies(NONE, filterv3.ProcessingMode_GRPC)
	if _, err := f.Do(context.Background(), &Request{}, canned(200, nil)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("GRPC body mode: err = %v, want ErrUnsupported", err)
	}
	// Envoy's config validation: FULL_DUPLEX_STREAMED needs trailers SEND.
	f.Mode = bothBodies(NONE, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED)
	if _, err := f.Do(context.Background(), &Request{}, canned(200, nil)); !errors.Is(err, ErrInvalid) {
		t.Errorf("FULL_DUPLEX_STREAMED without trailers SEND: err = %v, want ErrInvalid", err)
	}
}

// §4: header mutations in a STREAMED body reply are ignored; in BUFFERED applied.
func TestBodyReplyHeaderMutation(t *testing.T) {
	fn := func(req *extprocv3.ProcessingRequest) step {
		if req.GetResponseBody() != nil {
			return reply(answer(req, &extprocv3.CommonResponse{
				HeaderMutation: headerMutation([]*corev3.HeaderValueOption{setRaw("x-from-body", "1")})}))
		}
		return passAll(req)
	}
	for _, mode := range []filterv3.ProcessingMode_BodySendMode{STREAMED, BUFFERED} {
		res := do(t, Filter{Mode: bothBodies(NONE, mode)}, fn, &Request{}, canned(200, nil, "a", "b"))
		got := res.Headers.Get("X-From-Body")
		if want := map[filterv3.ProcessingMode_BodySendMode]string{STREAMED: "", BUFFERED: "1"}[mode]; got != want {
			t.Errorf("%v: x-from-body = %q, want %q", mode, got, want)
		}
		if mode == STREAMED && !hasNote(res, "ignored in STREAMED") {
			t.Errorf("STREAMED: no note about the ignored mutation: %q", res.Notes)
		}
	}
}

// §4: a response switched to STREAMED at response-headers time keeps the
// content-length Envoy saw under the old mode unless the processor removes it.
func TestStreamedOverrideContentLength(t *testing.T) {
	const body = `{"jsonrpc":"2.0","id":1,"result":{}}`
	proc := func(remove, setCL bool) func(*extprocv3.ProcessingRequest) step {
		return func(req *extprocv3.ProcessingRequest) step {
			switch {
			case req.GetResponseHeaders() != nil:
				r := pass(req)
				r.ModeOverride = bothBodies(NONE, STREAMED)
				hm := &extprocv3.HeaderMutation{}
				if remove {
					hm.RemoveHeaders = []string{"content-length"}
				}
				if setCL {
					hm.SetHeaders = []*corev3.HeaderValueOption{setRaw("content-length", "999")}
				}
				r.GetResponseHeaders().Response = &extprocv3.CommonResponse{HeaderMutation: hm}
				return reply(r)
			case req.GetResponseBody() != nil:
				return reply(answer(req, &extprocv3.CommonResponse{BodyMutation: bodyTo(string(upper(req.GetResponseBody().GetBody())))}))
			}
			return passAll(req)
		}
	}
	tests := []struct {
		name          string
		remove, setCL bool
		reset         bool
	}{
		{"content-length removed by the processor", true, false, false},
		{"content-length left in place", false, false, true},
		{"content-length set under STREAMED is dropped", false, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The mutation keeps the length, so an unchanged content-length
			// would still match: shrink the body to make the mismatch visible.
			up := canned(200, jsonHeaders(body+"  "), body, "  ")
			res := do(t, Filter{AllowModeOverride: true}, func(req *extprocv3.ProcessingRequest) step {
				if b := req.GetResponseBody(); b != nil && string(b.GetBody()) == "  " {
					return reply(answer(req, &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
						Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}}}))
				}
				return proc(tt.remove, tt.setCL)(req)
			}, &Request{}, up)
			if res.Reset != tt.reset {
				t.Fatalf("Reset = %v, want %v (LocalError %q, %s)", res.Reset, tt.reset, res.LocalError, res.Details)
			}
			if tt.reset {
				if res.LocalError != LocalStreamedContentLength {
					t.Errorf("LocalError = %q, want %q", res.LocalError, LocalStreamedContentLength)
				}
				if tt.setCL && !hasNote(res, "content-length set by the processor dropped") {
					t.Errorf("no note about the dropped content-length: %q", res.Notes)
				}
				return
			}
			if res.Headers.Get("Content-Length") != "" || !bytes.Equal(res.Body, upper([]byte(body))) {
				t.Errorf("content-length %q, body %q", res.Headers.Get("Content-Length"), res.Body)
			}
		})
	}
}

// §3.2: an empty body mutation holds the chunk back; a later chunk emits it.
func TestStreamedHoldBack(t *testing.T) {
	var held []byte
	fn := func(req *extprocv3.ProcessingRequest) step {
		b := req.GetResponseBody()
		if b == nil {
			return passAll(req)
		}
		held = append(held, b.GetBody()...)
		// Emit complete events only; hold the partial one.
		cut := 0
		if i := bytes.LastIndex(held, []byte("\n\n")); i >= 0 {
			cut = i + 2
		}
		if b.GetEndOfStream() {
			cut = len(held)
		}
		out := string(held[:cut])
		held = held[cut:]
		return reply(answer(req, &extprocv3.CommonResponse{BodyMutation: bodyTo(out)}))
	}
	res := do(t, Filter{Mode: bothBodies(NONE, STREAMED)}, fn, &Request{},
		canned(200, http.Header{"Content-Type": {"text/event-stream"}}, "data: a", "bc\n\nda", "ta: d\n\n"))
	want := [][]byte{[]byte("data: abc\n\n"), []byte("data: d\n\n")}
	if diff := cmp.Diff(want, res.Chunks); diff != "" {
		t.Errorf("client chunks (-want +got):\n%s", diff)
	}
}

// Each STREAMED chunk reaches the client before the upstream produces the next.
func TestStreamedChunkOrder(t *testing.T) {
	fn := func(req *extprocv3.ProcessingRequest) step {
		if b := req.GetResponseBody(); b != nil {
			return reply(answer(req, &extprocv3.CommonResponse{BodyMutation: bodyTo(string(upper(b.GetBody())))}))
		}
		return passAll(req)
	}
	up := make(chan []byte)
	seen := make(chan []byte, 4)
	f := Filter{Client: Serve(t, &scripted{fn: fn}), Mode: bothBodies(NONE, STREAMED), MessageTimeout: generous}
	type outcome struct {
		res *Result
		err error
	}
	done := make(chan outcome, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		res, err := f.Do(ctx, &Request{OnResponseChunk: func(c []byte) { seen <- c }},
			func(context.Context, *UpstreamRequest) (*UpstreamResponse, error) {
				return &UpstreamResponse{Status: 200, Stream: up}, nil
			})
		done <- outcome{res, err}
	}()
	for _, c := range []string{"one", "two", "three"} {
		select {
		case up <- []byte(c):
		case <-ctx.Done():
			t.Fatal("upstream chunk not consumed")
		}
		select {
		case got := <-seen:
			if string(got) != string(upper([]byte(c))) {
				t.Fatalf("client got %q, want %q", got, upper([]byte(c)))
			}
		case <-ctx.Done():
			t.Fatalf("chunk %q did not reach the client before the next one was produced", c)
		}
	}
	close(up)
	o := <-done
	if o.err != nil || o.res.Status != 200 || string(o.res.Body) != "ONETWOTHREE" {
		t.Fatalf("err %v, result %+v", o.err, o.res)
	}
}

func TestImmediateResponse(t *testing.T) {
	ct := setRaw("content-type", "application/json")
	tests := []struct {
		name    string
		ir      *extprocv3.ProcessingResponse
		status  int
		headers http.Header
		body    string
		local   string
	}{
		{"status, body, default content-type", immediate(typev3.StatusCode_Forbidden, "denied"), 403,
			http.Header{"Content-Type": {"text/plain"}, "Content-Length": {"6"}}, "denied", ""},
		{"MCP-friendly JSON-RPC error", immediate(typev3.StatusCode_OK, `{"jsonrpc":"2.0","id":1,"error":{}}`, ct), 200,
			http.Header{"Content-Type": {"application/json"}, "Content-Length": {"35"}}, `{"jsonrpc":"2.0","id":1,"error":{}}`, ""},
		{"missing status is 200", immediate(0, ""), 200, http.Header{"Content-Length": {"0"}}, "", ""},
		{"value-only header fails", immediate(typev3.StatusCode_Forbidden, "x",
			&corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "x-a", Value: "v"}}), 500,
			http.Header{"Content-Length": {"0"}}, "", LocalInvalidMutation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := do(t, Filter{}, func(req *extprocv3.ProcessingRequest) step { return reply(tt.ir) },
				post("{}"), canned(200, nil, "ok"))
			if res.Status != tt.status || string(res.Body) != tt.body || res.LocalError != tt.local || !res.Immediate {
				t.Errorf("status %d, body %q, LocalError %q, Immediate %v", res.Status, res.Body, res.LocalError, res.Immediate)
			}
			if diff := cmp.Diff(tt.headers, res.Headers); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if res.UpstreamRequest != nil {
				t.Errorf("the upstream was called")
			}
			if len(res.Sent) != 1 {
				t.Errorf("messages after the immediate response: %q", summary(res.Sent))
			}
		})
	}
}

func TestImmediateResponseAfterHeadersResets(t *testing.T) {
	fn := func(req *extprocv3.ProcessingRequest) step {
		if req.GetResponseBody() != nil {
			return reply(immediate(typev3.StatusCode_Forbidden, "no"))
		}
		return passAll(req)
	}
	res := do(t, Filter{Mode: bothBodies(NONE, STREAMED)}, fn, &Request{}, canned(200, nil, "data"))
	if !res.Reset || res.LocalError != LocalResetAfterHeaders || res.Status != 200 || len(res.Body) != 0 {
		t.Errorf("Reset %v, LocalError %q, status %d, body %q", res.Reset, res.LocalError, res.Status, res.Body)
	}
	// In BUFFERED mode the headers are held, so the immediate response wins.
	res = do(t, Filter{Mode: bothBodies(NONE, BUFFERED)}, fn, &Request{}, canned(200, nil, "data"))
	if res.Reset || res.Status != 403 || string(res.Body) != "no" {
		t.Errorf("BUFFERED: Reset %v, status %d, body %q", res.Reset, res.Status, res.Body)
	}
}

func TestContinueAndReplace(t *testing.T) {
	fn := func(req *extprocv3.ProcessingRequest) step {
		if req.GetRequestHeaders() != nil || req.GetResponseHeaders() != nil {
			return reply(answer(req, &extprocv3.CommonResponse{
				Status:       extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
				BodyMutation: bodyTo("replaced"),
			}))
		}
		return passAll(req)
	}
	res := do(t, Filter{Mode: bothBodies(BUFFERED, BUFFERED)}, fn, post("original"),
		canned(200, jsonHeaders("upstream"), "upstream"))
	if diff := cmp.Diff([]string{"request_headers", "response_headers"}, summary(res.Sent)); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if string(res.UpstreamRequest.Body) != "replaced" || res.UpstreamRequest.Headers.Get("Content-Length") != "" {
		t.Errorf("upstream body %q, content-length %q", res.UpstreamRequest.Body, res.UpstreamRequest.Headers.Get("Content-Length"))
	}
	if string(res.Body) != "replaced" || res.Headers.Get("Content-Length") != "" || res.Status != 200 {
		t.Errorf("client: status %d, body %q, content-length %q", res.Status, res.Body, res.Headers.Get("Content-Length"))
	}
}

// §8: BUFFERED bodies over the buffer limit.
func TestBufferLimit(t *testing.T) {
	res := do(t, Filter{Mode: bothBodies(BUFFERED, NONE), BufferLimit: 8}, passAll, post("0123456789"), canned(200, nil))
	if res.Status != 413 || res.LocalError != LocalBufferLimit || res.UpstreamRequest != nil {
		t.Errorf("request: status %d, LocalError %q, upstream reached %v", res.Status, res.LocalError, res.UpstreamRequest != nil)
	}
	res = do(t, Filter{Mode: bothBodies(NONE, BUFFERED), BufferLimit: 8}, passAll, &Request{}, canned(200, nil, "01234", "56789"))
	if res.Status != 500 || res.LocalError != LocalBufferLimit || res.UpstreamRequest == nil {
		t.Errorf("response: status %d, LocalError %q", res.Status, res.LocalError)
	}
	// BUFFERED_PARTIAL sends what fits and lets the rest through.
	res = do(t, Filter{Mode: bothBodies(NONE, PARTIAL), BufferLimit: 8}, passAll, &Request{}, canned(200, nil, "01234", "56789", "ab"))
	if diff := cmp.Diff([]string{"request_headers eos", "response_headers", `response_body "0123456789"`}, summary(res.Sent)); diff != "" {
		t.Errorf("BUFFERED_PARTIAL messages (-want +got):\n%s", diff)
	}
	if string(res.Body) != "0123456789ab" {
		t.Errorf("BUFFERED_PARTIAL body %q", res.Body)
	}
}

func TestUpstreamFailureIs503(t *testing.T) {
	res := do(t, Filter{}, passAll, &Request{}, func(context.Context, *UpstreamRequest) (*UpstreamResponse, error) {
		return nil, errors.New("connection refused")
	})
	if res.Status != 503 || res.UpstreamErr == nil || len(res.Sent) != 2 {
		t.Errorf("status %d, UpstreamErr %v, messages %q", res.Status, res.UpstreamErr, summary(res.Sent))
	}
}

// By default the stream ends with a half-close and an immediate reset: the
// server sees io.EOF or Canceled. GracefulClose waits for the server: io.EOF.
func TestStreamEnd(t *testing.T) {
	for _, graceful := range []bool{false, true} {
		ended := make(chan error, 1)
		srv := &endRecorder{ended: ended, linger: !graceful}
		f := Filter{Client: Serve(t, srv), MessageTimeout: generous, GracefulClose: graceful}
		res, err := f.Do(context.Background(), &Request{}, canned(200, nil, "ok"))
		if err != nil || res.Status != 200 {
			t.Fatalf("graceful %v: err %v, status %d", graceful, err, res.Status)
		}
		if !graceful && hasNote(res, "did not end the stream") {
			t.Errorf("default: the fake waited for the server after the half-close: %q", res.Notes)
		}
		got := <-ended
		switch {
		case graceful && got != nil:
			t.Errorf("GracefulClose: server saw %v, want io.EOF", got)
		case !graceful && status.Code(got) != codes.Canceled && !errors.Is(got, context.Canceled):
			t.Errorf("default: server saw %v after io.EOF, want Canceled (a reset)", got)
		}
	}
}

// endRecorder replies to everything and reports how its stream ended
// (nil for io.EOF).
// With linger, it keeps the stream open after io.EOF and reports how the
// fake ended it then (Canceled for a reset).
type endRecorder struct {
	extprocv3.UnimplementedExternalProcessorServer
	ended  chan<- error
	linger bool
}

func (s *endRecorder) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
				if s.linger {
					<-stream.Context().Done()
					err = stream.Context().Err()
				}
			}
			s.ended <- err
			return nil
		}
		if err := stream.Send(pass(req)); err != nil {
			return err
		}
	}
}

func TestDoRejectsBadArguments(t *testing.T) {
	var f Filter
	if _, err := f.Do(context.Background(), &Request{}, canned(200, nil)); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil Client: err = %v", err)
	}
	f.Client = Serve(t, &scripted{fn: passAll})
	if _, err := f.Do(context.Background(), nil, canned(200, nil)); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil request: err = %v", err)
	}
}

// A request switched to STREAMED by mode_override keeps its content-length;
// rewriting chunks to another length would send the upstream a lying request.
func TestStreamedOverrideRequestContentLength(t *testing.T) {
	fn := func(req *extprocv3.ProcessingRequest) step {
		switch {
		case req.GetRequestHeaders() != nil:
			r := pass(req)
			r.ModeOverride = bothBodies(STREAMED, NONE)
			return reply(r)
		case req.GetRequestBody() != nil:
			return reply(answer(req, &extprocv3.CommonResponse{BodyMutation: bodyTo("longer than before")}))
		}
		return passAll(req)
	}
	res := do(t, Filter{AllowModeOverride: true}, fn, post("{}"), canned(200, nil))
	if res.Status != 500 || res.LocalError != LocalStreamedRequestContentLength || res.UpstreamRequest != nil {
		t.Errorf("status %d, LocalError %q (%s), upstream reached %v", res.Status, res.LocalError, res.Details, res.UpstreamRequest != nil)
	}
	// Configured STREAMED: Envoy drops content-length itself, all is well.
	res = do(t, Filter{Mode: bothBodies(STREAMED, NONE)}, fn, post("{}"), canned(200, nil))
	if res.Status != 200 || string(res.UpstreamRequest.Body) != "longer than before" || res.UpstreamRequest.Headers.Get("Content-Length") != "" {
		t.Errorf("configured STREAMED: status %d, upstream %+v", res.Status, res.UpstreamRequest)
	}
}

func TestResponseStatusMutation(t *testing.T) {
	fn := func(req *extprocv3.ProcessingRequest) step {
		if req.GetResponseHeaders() != nil {
			return reply(answer(req, &extprocv3.CommonResponse{
				HeaderMutation: headerMutation([]*corev3.HeaderValueOption{setRaw(":status", "202"), setRaw("x-seen", "yes")})}))
		}
		return passAll(req)
	}
	res := do(t, Filter{}, fn, &Request{}, canned(200, nil, "ok"))
	if res.Status != 202 || res.Headers.Get("X-Seen") != "yes" || string(res.Body) != "ok" {
		t.Errorf("status %d, headers %v, body %q", res.Status, res.Headers, res.Body)
	}
}

func TestListenAndDial(t *testing.T) {
	client, stop, err := Listen(context.Background(), &scripted{fn: passAll})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	f := Filter{Client: client, MessageTimeout: generous}
	res, err := f.Do(context.Background(), &Request{}, canned(200, nil))
	if err != nil || res.Status != 200 || len(res.Received) != 2 {
		t.Fatalf("err %v, result %+v", err, res)
	}
	stop()
	stop() // idempotent
	// A stopped processor is a gRPC error: 500, or unprocessed when allowed.
	res, err = f.Do(context.Background(), &Request{}, canned(200, nil))
	if err != nil || res.Status != 500 || res.LocalError != LocalGRPCError {
		t.Errorf("stopped server: err %v, status %d, LocalError %q", err, res.Status, res.LocalError)
	}
}
