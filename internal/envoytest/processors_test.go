package envoytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Tiny ExternalProcessor servers, good and deliberately bad, for the tests.

// step is what a scripted processor does with one message.
type step struct {
	replies []*extprocv3.ProcessingResponse
	end     bool  // return err from Process after the replies
	err     error // nil: a clean end (the client sees io.EOF)
	hang    bool  // stop replying and reading until the stream ends
}

func reply(rs ...*extprocv3.ProcessingResponse) step { return step{replies: rs} }

// scripted is an ExternalProcessor driven by a function of each message.
type scripted struct {
	extprocv3.UnimplementedExternalProcessorServer
	fn func(req *extprocv3.ProcessingRequest) step
}

func (s *scripted) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		st := s.fn(req)
		for _, r := range st.replies {
			if err := stream.Send(r); err != nil {
				return err
			}
		}
		if st.hang {
			<-stream.Context().Done()
			return stream.Context().Err()
		}
		if st.end {
			return st.err
		}
	}
}

// answer builds the reply of req's kind carrying cr.
func answer(req *extprocv3.ProcessingRequest, cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	switch req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
			RequestHeaders: &extprocv3.HeadersResponse{Response: cr}}}
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
			ResponseHeaders: &extprocv3.HeadersResponse{Response: cr}}}
	case *extprocv3.ProcessingRequest_RequestBody:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
			RequestBody: &extprocv3.BodyResponse{Response: cr}}}
	case *extprocv3.ProcessingRequest_ResponseBody:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
			ResponseBody: &extprocv3.BodyResponse{Response: cr}}}
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
			RequestTrailers: &extprocv3.TrailersResponse{HeaderMutation: cr.GetHeaderMutation()}}}
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
			ResponseTrailers: &extprocv3.TrailersResponse{HeaderMutation: cr.GetHeaderMutation()}}}
	}
	panic(fmt.Sprintf("answer: unexpected request %T", req.GetRequest()))
}

// pass is the reply that lets req through unchanged.
func pass(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse { return answer(req, nil) }

// passAll is the well-behaved do-nothing processor.
func passAll(req *extprocv3.ProcessingRequest) step { return reply(pass(req)) }

func setRaw(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)}}
}

func headerMutation(set []*corev3.HeaderValueOption, remove ...string) *extprocv3.HeaderMutation {
	return &extprocv3.HeaderMutation{SetHeaders: set, RemoveHeaders: remove}
}

func bodyTo(b string) *extprocv3.BodyMutation {
	return &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte(b)}}
}

func immediate(code typev3.StatusCode, body string, set ...*corev3.HeaderValueOption) *extprocv3.ProcessingResponse {
	ir := &extprocv3.ImmediateResponse{Body: []byte(body), Details: "blocked by test"}
	if code != 0 {
		ir.Status = &typev3.HttpStatus{Code: code}
	}
	if len(set) > 0 {
		ir.Headers = headerMutation(set)
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: ir}}
}

// headerOf reads a header from a headers message.
func headerOf(req *extprocv3.ProcessingRequest, key string) string {
	var hs *extprocv3.HttpHeaders
	switch v := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		hs = v.RequestHeaders
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		hs = v.ResponseHeaders
	}
	for _, h := range hs.GetHeaders().GetHeaders() {
		if h.GetKey() == key {
			return string(h.GetRawValue())
		}
	}
	return ""
}

func bothBodies(req, resp filterv3.ProcessingMode_BodySendMode) *filterv3.ProcessingMode {
	return &filterv3.ProcessingMode{RequestBodyMode: req, ResponseBodyMode: resp}
}

// canned is an upstream that answers with a fixed response.
func canned(status int, h http.Header, chunks ...string) Upstream {
	return func(context.Context, *UpstreamRequest) (*UpstreamResponse, error) {
		r := &UpstreamResponse{Status: status, Headers: h.Clone()}
		for _, c := range chunks {
			r.Body = append(r.Body, []byte(c))
		}
		return r, nil
	}
}

func jsonHeaders(body string) http.Header {
	return http.Header{"Content-Type": {"application/json"}, "Content-Length": {fmt.Sprint(len(body))}}
}

// generous is the message timeout of tests that expect no timeout: long
// enough never to fire on a loaded machine, never waited for.
const generous = 10 * time.Second

// do runs one exchange against a scripted processor.
func do(t *testing.T, f Filter, fn func(*extprocv3.ProcessingRequest) step, req *Request, up Upstream) *Result {
	t.Helper()
	f.Client = Serve(t, &scripted{fn: fn})
	if f.MessageTimeout == 0 {
		f.MessageTimeout = generous
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := f.Do(ctx, req, up)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	return res
}

// summary renders the messages the fake sent, one line each.
func summary(msgs []*extprocv3.ProcessingRequest) []string {
	var out []string
	for _, m := range msgs {
		switch v := m.GetRequest().(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			out = append(out, "request_headers"+eos(v.RequestHeaders.GetEndOfStream()))
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			out = append(out, "response_headers"+eos(v.ResponseHeaders.GetEndOfStream()))
		case *extprocv3.ProcessingRequest_RequestBody:
			out = append(out, fmt.Sprintf("request_body %q%s", v.RequestBody.GetBody(), eos(v.RequestBody.GetEndOfStream())))
		case *extprocv3.ProcessingRequest_ResponseBody:
			out = append(out, fmt.Sprintf("response_body %q%s", v.ResponseBody.GetBody(), eos(v.ResponseBody.GetEndOfStream())))
		case *extprocv3.ProcessingRequest_RequestTrailers:
			out = append(out, "request_trailers")
		case *extprocv3.ProcessingRequest_ResponseTrailers:
			out = append(out, "response_trailers")
		}
	}
	return out
}

func eos(b bool) string {
	if b {
		return " eos"
	}
	return ""
}

func hasNote(res *Result, substr string) bool {
	for _, n := range res.Notes {
		if strings.Contains(n, substr) {
			return true
		}
	}
	return false
}

func upper(b []byte) []byte { return bytes.ToUpper(b) }

func boolValue(b bool) *wrapperspb.BoolValue { return wrapperspb.Bool(b) }
