package processor

import (
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Replies are built here so the rules of the ext_proc contract live in one
// file: header values in raw_value only (docs/extproc-contract.md §5), content-length set in
// the same reply as a buffered body mutation (§4), both body modes explicit
// in every mode_override (§3.1).

func requestHeadersReply(override *filterv3.ProcessingMode) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{
		Response:     &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}},
		ModeOverride: override,
	}
}

func responseHeadersReply(override *filterv3.ProcessingMode, mutation *extprocv3.HeaderMutation) *extprocv3.ProcessingResponse {
	hr := &extprocv3.HeadersResponse{}
	if mutation != nil {
		hr.Response = &extprocv3.CommonResponse{HeaderMutation: mutation}
	}
	return &extprocv3.ProcessingResponse{
		Response:     &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: hr},
		ModeOverride: override,
	}
}

// bodyReply answers a body message. A nil body leaves the chunk untouched; a
// non-nil body replaces it. setLength adds content-length for BUFFERED mode
// (in STREAMED mode Envoy ignores header mutations of body replies).
func bodyReply(response bool, body []byte, setLength bool) *extprocv3.ProcessingResponse {
	br := &extprocv3.BodyResponse{}
	if body != nil {
		cr := &extprocv3.CommonResponse{}
		if len(body) == 0 {
			cr.BodyMutation = &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}}
		} else {
			cr.BodyMutation = &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: body}}
		}
		if setLength {
			cr.HeaderMutation = &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
				header("content-length", strconv.Itoa(len(body))),
			}}
		}
		br.Response = cr
	}
	if response {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: br}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: br}}
}

func trailersReply(response bool) *extprocv3.ProcessingResponse {
	if response {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}}
}

// jsonRPCReply ends the exchange with an HTTP answer carrying a JSON-RPC body.
// denied marks answers caused by a plugin (x-mcp-denied: true).
func jsonRPCReply(status int, body []byte, denied bool, extra map[string]string) *extprocv3.ProcessingResponse {
	set := []*corev3.HeaderValueOption{header("content-type", "application/json")}
	if denied {
		set = append(set, header("x-mcp-denied", "true"))
	}
	for k, v := range extra {
		set = append(set, header(k, v))
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(status)},
			Headers: &extprocv3.HeaderMutation{SetHeaders: set},
			Body:    body,
			Details: "mcp_extproc_refused",
		},
	}}
}

func header(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header: &corev3.HeaderValue{Key: key, RawValue: []byte(value)},
		Append: wrapperspb.Bool(false),
	}
}

// Processing modes chosen by mode_override. Body modes are always both set
// (docs/extproc-contract.md §3.1: both are taken literally). Each call returns a new message so
// no proto is shared between streams.

// modeSkipAll: no body in either direction and no response headers message, so
// traffic no hook can apply to costs one round trip.
func modeSkipAll() *filterv3.ProcessingMode {
	return &filterv3.ProcessingMode{
		ResponseHeaderMode: filterv3.ProcessingMode_SKIP,
		RequestBodyMode:    filterv3.ProcessingMode_NONE,
		ResponseBodyMode:   filterv3.ProcessingMode_NONE,
	}
}

// modeInspectRequest reads the whole request body, then the response headers.
func modeInspectRequest() *filterv3.ProcessingMode {
	return &filterv3.ProcessingMode{
		RequestBodyMode:  filterv3.ProcessingMode_BUFFERED,
		ResponseBodyMode: filterv3.ProcessingMode_NONE,
	}
}

// modeInspectRequestOnly reads the whole request body and skips the response
// headers: no post hook can apply to the answer. If Envoy ignored the
// override (allow_mode_override false), it ignores this SKIP too and sends
// the response headers, where the processor sees that the request body never
// came and refuses (the filter's own response_header_mode must stay SEND,
// the default, for that check to run).
func modeInspectRequestOnly() *filterv3.ProcessingMode {
	return &filterv3.ProcessingMode{
		ResponseHeaderMode: filterv3.ProcessingMode_SKIP,
		RequestBodyMode:    filterv3.ProcessingMode_BUFFERED,
		ResponseBodyMode:   filterv3.ProcessingMode_NONE,
	}
}

// modeResponseStreamed streams the response body chunk by chunk and asks for
// the response trailers: when trailers follow, no body chunk carries
// end_of_stream (docs/extproc-contract.md §1) and the trailers message is the
// only end of the body the processor sees.
func modeResponseStreamed() *filterv3.ProcessingMode {
	return &filterv3.ProcessingMode{
		RequestBodyMode:     filterv3.ProcessingMode_NONE,
		ResponseBodyMode:    filterv3.ProcessingMode_STREAMED,
		ResponseTrailerMode: filterv3.ProcessingMode_SEND,
	}
}

// modeResponse sets the response body mode at response-headers time.
func modeResponse(body filterv3.ProcessingMode_BodySendMode) *filterv3.ProcessingMode {
	return &filterv3.ProcessingMode{
		RequestBodyMode:  filterv3.ProcessingMode_NONE,
		ResponseBodyMode: body,
	}
}

// forPlan is the request-headers reply that asks Envoy for what plan p
// needs: shared, never changed.
func (c *canned) forPlan(p plan) *extprocv3.ProcessingResponse {
	switch {
	case p.body && p.readAnswer:
		return c.inspectRequest
	case p.body && p.answer:
		return c.inspectRequestHeaders
	case p.body:
		return c.inspectRequestOnly
	case p.readAnswer:
		return c.readResponse
	case p.answer:
		return c.answerHeaders
	}
	return c.skipAll
}

// canned holds the replies that do not depend on the stream, built once per
// Server and shared by all streams (messages are only read after they are
// built, so concurrent marshalling is safe): passthrough traffic allocates
// no reply of its own.
type canned struct {
	skipAll, inspectRequest *extprocv3.ProcessingResponse
	readResponse            *extprocv3.ProcessingResponse // no bodies now, the response headers decide
	inspectRequestOnly      *extprocv3.ProcessingResponse
	// inspectRequestHeaders and answerHeaders ask for the response
	// headers of an answer that is not read (http_post_request).
	inspectRequestHeaders, answerHeaders *extprocv3.ProcessingResponse
	responseNone, responseBuffered       *extprocv3.ProcessingResponse
	responseStreamed                     *extprocv3.ProcessingResponse
	requestBodyAsIs, responseBodyAsIs    *extprocv3.ProcessingResponse
	requestTrailers, responseTrailers    *extprocv3.ProcessingResponse
}

// readsAnswer is the request-headers reply of a request whose answer may
// be read: Accept-Encoding is removed, so that the server answers
// uncompressed and the post hooks and the rules read what the client will
// (an answer that still comes encoded is decoded or refused: answer.go).
func readsAnswer(override *filterv3.ProcessingMode) *extprocv3.ProcessingResponse {
	resp := requestHeadersReply(override)
	resp.GetRequestHeaders().Response = &extprocv3.CommonResponse{
		HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: []string{"accept-encoding"}},
	}
	return resp
}

// decodedBodyReply replaces a buffered response body that came
// content-encoded with body, which is not: the encoding header goes.
func decodedBodyReply(body []byte) *extprocv3.ProcessingResponse {
	resp := bodyReply(true, body, true)
	cr := resp.GetResponseBody().GetResponse()
	cr.HeaderMutation.RemoveHeaders = append(cr.HeaderMutation.RemoveHeaders, "content-encoding")
	return resp
}

func newCanned() *canned {
	return &canned{
		skipAll:            requestHeadersReply(modeSkipAll()),
		inspectRequest:     readsAnswer(modeInspectRequest()),
		readResponse:       readsAnswer(modeResponse(filterv3.ProcessingMode_NONE)),
		inspectRequestOnly: requestHeadersReply(modeInspectRequestOnly()),
		inspectRequestHeaders: requestHeadersReply(&filterv3.ProcessingMode{ResponseHeaderMode: filterv3.ProcessingMode_SEND,
			RequestBodyMode: filterv3.ProcessingMode_BUFFERED, ResponseBodyMode: filterv3.ProcessingMode_NONE}),
		answerHeaders: requestHeadersReply(&filterv3.ProcessingMode{ResponseHeaderMode: filterv3.ProcessingMode_SEND,
			RequestBodyMode: filterv3.ProcessingMode_NONE, ResponseBodyMode: filterv3.ProcessingMode_NONE}),
		// Envoy decided about content-length under the old mode; a
		// rewritten stream changes the length, so it goes (§4).
		responseStreamed: responseHeadersReply(modeResponseStreamed(),
			&extprocv3.HeaderMutation{RemoveHeaders: []string{"content-length"}}),
		responseNone:     responseHeadersReply(modeResponse(filterv3.ProcessingMode_NONE), nil),
		responseBuffered: responseHeadersReply(modeResponse(filterv3.ProcessingMode_BUFFERED), nil),
		requestBodyAsIs:  bodyReply(false, nil, false),
		responseBodyAsIs: bodyReply(true, nil, false),
		requestTrailers:  trailersReply(false),
		responseTrailers: trailersReply(true),
	}
}
