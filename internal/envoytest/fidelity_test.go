package envoytest

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
)

// Rules of Envoy's ext_proc filter (1.37) that the fake must enforce, one
// table per rule: the messages the fake sends, the replies, the HTTP outcome.

const DUPLEX = filterv3.ProcessingMode_FULL_DUPLEX_STREAMED

// A reply after processing finished is dropped, not a 500.
func TestLateReplyDropped(t *testing.T) {
	extraAtEnd := func(req *extprocv3.ProcessingRequest) step {
		if req.GetResponseHeaders() != nil {
			return reply(pass(req), pass(req))
		}
		return passAll(req)
	}
	res := do(t, Filter{GracefulClose: true}, extraAtEnd, &Request{}, canned(200, nil, "ok"))
	if res.Status != 200 || res.LocalError != "" || string(res.Body) != "ok" {
		t.Errorf("status %d, LocalError %q (%s), body %q; want the response untouched", res.Status, res.LocalError, res.Details, res.Body)
	}
	if len(res.Ignored) != 1 || replyPhase(res.Ignored[0]) != phaseResponseHeaders {
		t.Errorf("Ignored = %v, want the extra response_headers reply", res.Ignored)
	}
}

// An ImmediateResponse is a valid answer to any message, trailers included.
func TestImmediateResponseAfterAnyMessage(t *testing.T) {
	sendAll := &filterv3.ProcessingMode{RequestBodyMode: BUFFERED, ResponseBodyMode: BUFFERED,
		RequestTrailerMode: SEND, ResponseTrailerMode: SEND}
	tests := []struct {
		at       func(*extprocv3.ProcessingRequest) bool
		name     string
		upstream bool
	}{
		{func(r *extprocv3.ProcessingRequest) bool { return r.GetRequestHeaders() != nil }, "request_headers", false},
		{func(r *extprocv3.ProcessingRequest) bool { return r.GetRequestBody() != nil }, "request_body", false},
		{func(r *extprocv3.ProcessingRequest) bool { return r.GetRequestTrailers() != nil }, "request_trailers", false},
		{func(r *extprocv3.ProcessingRequest) bool { return r.GetResponseHeaders() != nil }, "response_headers", true},
		{func(r *extprocv3.ProcessingRequest) bool { return r.GetResponseBody() != nil }, "response_body", true},
		{func(r *extprocv3.ProcessingRequest) bool { return r.GetResponseTrailers() != nil }, "response_trailers", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := func(req *extprocv3.ProcessingRequest) step {
				if tt.at(req) {
					return reply(immediate(typev3.StatusCode_Forbidden, "no"))
				}
				return passAll(req)
			}
			req := post("{}")
			req.Trailers = http.Header{"X-Req-Trailer": {"t"}}
			up := func(context.Context, *UpstreamRequest) (*UpstreamResponse, error) {
				return &UpstreamResponse{Status: 200, Body: [][]byte{[]byte("ok")}, Trailers: http.Header{"X-Resp-Trailer": {"t"}}}, nil
			}
			res := do(t, Filter{Mode: sendAll}, fn, req, up)
			if res.Status != 403 || string(res.Body) != "no" || !res.Immediate || res.LocalError != "" {
				t.Errorf("status %d, body %q, Immediate %v, LocalError %q (%s)", res.Status, res.Body, res.Immediate, res.LocalError, res.Details)
			}
			if (res.UpstreamRequest != nil) != tt.upstream {
				t.Errorf("upstream reached %v, want %v", res.UpstreamRequest != nil, tt.upstream)
			}
		})
	}
}

// With trailers, no body message carries end_of_stream: the trailers end it.
func TestTrailersEndTheBody(t *testing.T) {
	tests := []struct {
		name string
		mode *filterv3.ProcessingMode
		body []string
		want []string
	}{
		{"buffered", &filterv3.ProcessingMode{RequestBodyMode: BUFFERED, RequestTrailerMode: SEND}, []string{"a", "b"},
			[]string{"request_headers", `request_body "ab"`, "request_trailers", "response_headers eos"}},
		{"streamed", &filterv3.ProcessingMode{RequestBodyMode: STREAMED, RequestTrailerMode: SEND}, []string{"a", "b"},
			[]string{"request_headers", `request_body "a"`, `request_body "b"`, "request_trailers", "response_headers eos"}},
		{"buffered partial", &filterv3.ProcessingMode{RequestBodyMode: PARTIAL, RequestTrailerMode: SEND}, []string{"a", "b"},
			[]string{"request_headers", `request_body "ab"`, "request_trailers", "response_headers eos"}},
		{"buffered, trailers skipped", &filterv3.ProcessingMode{RequestBodyMode: BUFFERED}, []string{"a", "b"},
			[]string{"request_headers", `request_body "ab"`, "response_headers eos"}},
		{"no body", &filterv3.ProcessingMode{RequestBodyMode: BUFFERED, RequestTrailerMode: SEND}, nil,
			[]string{"request_headers", "request_trailers", "response_headers eos"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := post(tt.body...)
			req.Trailers = http.Header{"Grpc-Status": {"0"}}
			res := do(t, Filter{Mode: tt.mode}, passAll, req, canned(200, nil))
			if diff := cmp.Diff(tt.want, summary(res.Sent)); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if res.Status != 200 || res.UpstreamRequest.Trailers.Get("Grpc-Status") != "0" {
				t.Errorf("status %d, upstream trailers %v", res.Status, res.UpstreamRequest.Trailers)
			}
		})
	}
}

// disallow_is_error: each mutation the rules refuse is a 500 (even with
// failure_mode_allow); without it the mutation is ignored and listed.
func TestDisallowIsError(t *testing.T) {
	appendTo := func(k, v string) *corev3.HeaderValueOption {
		o := setRaw(k, v)
		o.Append = boolValue(true)
		return o
	}
	set := func(o ...*corev3.HeaderValueOption) *extprocv3.HeaderMutation { return headerMutation(o) }
	tests := []struct {
		name     string
		response bool // mutate the response headers instead of the request's
		hm       *extprocv3.HeaderMutation
		refused  string // "" when the mutation is allowed
	}{
		{name: "remove :path", hm: headerMutation(nil, ":path"), refused: "remove :path"},
		{name: "remove host", hm: headerMutation(nil, "host"), refused: "remove host"},
		{name: "remove x-envoy-foo", hm: headerMutation(nil, "x-envoy-foo"), refused: "remove x-envoy-foo"},
		{name: "append to :path", hm: set(appendTo(":path", "/x")), refused: "append :path"},
		{name: "set x-envoy-foo", hm: set(setRaw("x-envoy-foo", "1")), refused: "set x-envoy-foo"},
		{name: "set x-envoyfoo (no dash)", hm: set(setRaw("x-envoyfoo", "1")), refused: "set x-envoyfoo"},
		{name: "set host", hm: set(setRaw("host", "evil")), refused: "set host"},
		{name: "set :authority", hm: set(setRaw(":authority", "evil")), refused: "set :authority"},
		{name: "set :scheme", hm: set(setRaw(":scheme", "https")), refused: "set :scheme"},
		{name: "set :method", hm: set(setRaw(":method", "PUT")), refused: "set :method"},
		{name: ":status below 200", response: true, hm: set(setRaw(":status", "101")), refused: "set :status"},
		{name: ":status not a number", response: true, hm: set(setRaw(":status", "abc")), refused: "set :status"},
		{name: "set :path is allowed", hm: set(setRaw(":path", "/other"))},
		{name: "x-env is not x-envoy", hm: set(setRaw("x-env", "1"))},
		{name: "remove an ordinary header", hm: headerMutation(nil, "content-type")},
		{name: ":status 201 is allowed", response: true, hm: set(setRaw(":status", "201"))},
	}
	for _, tt := range tests {
		for _, strict := range []bool{true, false} {
			name := tt.name + map[bool]string{true: ", disallow_is_error", false: ", default rules"}[strict]
			t.Run(name, func(t *testing.T) {
				fn := func(req *extprocv3.ProcessingRequest) step {
					if (tt.response && req.GetResponseHeaders() != nil) || (!tt.response && req.GetRequestHeaders() != nil) {
						return reply(answer(req, &extprocv3.CommonResponse{HeaderMutation: tt.hm}))
					}
					return passAll(req)
				}
				res := do(t, Filter{DisallowIsError: strict, FailureModeAllow: true}, fn, post("{}"), canned(200, nil, "ok"))
				if tt.refused != "" && strict {
					if res.Status != 500 || res.LocalError != LocalInvalidMutation {
						t.Errorf("status %d, LocalError %q; want 500, %q", res.Status, res.LocalError, LocalInvalidMutation)
					}
					return
				}
				if res.Status == 500 || res.LocalError != "" {
					t.Fatalf("status %d, LocalError %q (%s); want the exchange to go on", res.Status, res.LocalError, res.Details)
				}
				var want []string
				if tt.refused != "" {
					want = []string{tt.refused}
				}
				if diff := cmp.Diff(want, res.RejectedMutations); diff != "" {
					t.Errorf("rejected mutations (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// An ImmediateResponse header the rules refuse is skipped; the reply is sent.
func TestImmediateResponseSkipsRefusedHeaders(t *testing.T) {
	ir := immediate(typev3.StatusCode_Forbidden, "no", setRaw("x-envoy-foo", "1"), setRaw("x-ok", "1"))
	res := do(t, Filter{DisallowIsError: true}, func(*extprocv3.ProcessingRequest) step { return reply(ir) }, &Request{}, canned(200, nil))
	if res.Status != 403 || res.LocalError != "" || res.Headers.Get("X-Ok") != "1" || res.Headers.Get("X-Envoy-Foo") != "" {
		t.Errorf("status %d, LocalError %q (%s), headers %v", res.Status, res.LocalError, res.Details, res.Headers)
	}
}

// observability_mode: messages go out, no reply is expected or applied;
// replies are dropped and listed in Result.Ignored.
func TestObservabilityMode(t *testing.T) {
	mutating := func(req *extprocv3.ProcessingRequest) step {
		return reply(answer(req, &extprocv3.CommonResponse{
			HeaderMutation: headerMutation([]*corev3.HeaderValueOption{setRaw("x-seen", "1")})}))
	}
	silent := func(*extprocv3.ProcessingRequest) step { return step{} }
	tests := []struct {
		name    string
		fn      func(*extprocv3.ProcessingRequest) step
		ignored int
	}{
		{"a server that answers", mutating, 4},
		{"a silent server", silent, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Filter{ObservabilityMode: true, Mode: bothBodies(BUFFERED, BUFFERED), DeferredCloseTimeout: generous}
			res := do(t, f, tt.fn, post("{}"), canned(200, nil, "ok"))
			want := []string{"request_headers", `request_body "{}" eos`, "response_headers", `response_body "ok" eos`}
			if diff := cmp.Diff(want, summary(res.Sent)); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if res.Status != 200 || string(res.Body) != "ok" || res.Headers.Get("X-Seen") != "" || res.UpstreamRequest.Headers.Get("X-Seen") != "" {
				t.Errorf("status %d, body %q, headers %v: want the exchange unprocessed", res.Status, res.Body, res.Headers)
			}
			for _, m := range res.Sent {
				if !m.GetObservabilityMode() {
					t.Errorf("message %q without observability_mode", summary([]*extprocv3.ProcessingRequest{m}))
				}
			}
			if len(res.Ignored) != tt.ignored {
				t.Errorf("Ignored = %d replies, want %d", len(res.Ignored), tt.ignored)
			}
		})
	}
}

// FULL_DUPLEX_STREAMED: replies carry streamed_response; a plain body is
// spurious; mode_override is ignored; there is no message timer.
func TestFullDuplexStreamed(t *testing.T) {
	streamed := func(b []byte, eos bool) *extprocv3.BodyMutation {
		return &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
			StreamedResponse: &extprocv3.StreamedBodyResponse{Body: b, EndOfStream: eos}}}
	}
	upperStreamed := func(req *extprocv3.ProcessingRequest) step {
		if b := req.GetRequestBody(); b != nil {
			return reply(answer(req, &extprocv3.CommonResponse{BodyMutation: streamed(upper(b.GetBody()), b.GetEndOfStream())}))
		}
		r := pass(req)
		if req.GetRequestHeaders() != nil {
			r.ModeOverride = bothBodies(NONE, BUFFERED)
		}
		return reply(r)
	}
	plainBody := func(req *extprocv3.ProcessingRequest) step {
		if req.GetRequestBody() != nil {
			return reply(answer(req, &extprocv3.CommonResponse{BodyMutation: bodyTo("x")}))
		}
		return passAll(req)
	}
	late := func(req *extprocv3.ProcessingRequest) step {
		time.Sleep(50 * time.Millisecond) // far beyond the 1ms message timeout
		return upperStreamed(req)
	}
	mode := &filterv3.ProcessingMode{RequestBodyMode: DUPLEX, RequestTrailerMode: SEND}
	tests := []struct {
		name     string
		fn       func(*extprocv3.ProcessingRequest) step
		timeout  time.Duration
		trailers bool
		status   int
		local    string
		body     string
		msgs     []string
	}{
		{"streamed_response replaces the body, override ignored", upperStreamed, 0, false, 200, "", "AB",
			[]string{"request_headers", `request_body "a"`, `request_body "b" eos`, "response_headers"}},
		{"with trailers the trailers reply ends the body", upperStreamed, 0, true, 200, "", "AB",
			[]string{"request_headers", `request_body "a"`, `request_body "b"`, "request_trailers", "response_headers"}},
		{"plain body mutation is spurious", plainBody, 0, false, 500, LocalSpurious, "",
			[]string{"request_headers", `request_body "a"`, `request_body "b" eos`}},
		{"no message timer", late, time.Millisecond, false, 200, "", "AB",
			[]string{"request_headers", `request_body "a"`, `request_body "b" eos`, "response_headers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := post("a", "b")
			if tt.trailers {
				req.Trailers = http.Header{"X-T": {"1"}}
			}
			res := do(t, Filter{Mode: mode, AllowModeOverride: true, MessageTimeout: tt.timeout}, tt.fn, req, canned(200, nil, "ok"))
			if res.Status != tt.status || res.LocalError != tt.local {
				t.Fatalf("status %d, LocalError %q (%s); want %d, %q", res.Status, res.LocalError, res.Details, tt.status, tt.local)
			}
			if diff := cmp.Diff(tt.msgs, summary(res.Sent)); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if tt.status == 200 && string(res.UpstreamRequest.Body) != tt.body {
				t.Errorf("upstream body %q, want %q", res.UpstreamRequest.Body, tt.body)
			}
		})
	}
}
