package envoytest

import (
	"errors"
	"fmt"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// phase names a ProcessingRequest or ProcessingResponse oneof.
type phase int

const (
	phaseNone phase = iota
	phaseRequestHeaders
	phaseRequestBody
	phaseRequestTrailers
	phaseResponseHeaders
	phaseResponseBody
	phaseResponseTrailers
	phaseImmediate
)

var phaseNames = [...]string{"no response", "request_headers", "request_body", "request_trailers",
	"response_headers", "response_body", "response_trailers", "immediate_response"}

func (p phase) String() string { return phaseNames[p] }

func (p phase) isHeaders() bool { return p == phaseRequestHeaders || p == phaseResponseHeaders }

// replyPhase reports which oneof a reply carries.
func replyPhase(r *extprocv3.ProcessingResponse) phase {
	switch r.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		return phaseRequestHeaders
	case *extprocv3.ProcessingResponse_RequestBody:
		return phaseRequestBody
	case *extprocv3.ProcessingResponse_RequestTrailers:
		return phaseRequestTrailers
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		return phaseResponseHeaders
	case *extprocv3.ProcessingResponse_ResponseBody:
		return phaseResponseBody
	case *extprocv3.ProcessingResponse_ResponseTrailers:
		return phaseResponseTrailers
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		return phaseImmediate
	}
	return phaseNone
}

// CommonOf returns the CommonResponse of a headers or body reply.
func CommonOf(r *extprocv3.ProcessingResponse) *extprocv3.CommonResponse {
	switch v := r.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		return v.RequestHeaders.GetResponse()
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		return v.ResponseHeaders.GetResponse()
	case *extprocv3.ProcessingResponse_RequestBody:
		return v.RequestBody.GetResponse()
	case *extprocv3.ProcessingResponse_ResponseBody:
		return v.ResponseBody.GetResponse()
	}
	return nil
}

// trailersMutation returns the header mutation of a trailers reply.
func trailersMutation(r *extprocv3.ProcessingResponse) *extprocv3.HeaderMutation {
	switch v := r.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestTrailers:
		return v.RequestTrailers.GetHeaderMutation()
	case *extprocv3.ProcessingResponse_ResponseTrailers:
		return v.ResponseTrailers.GetHeaderMutation()
	}
	return nil
}

// localError is a local reply Envoy sends (or a reset, once headers went out).
type localError struct {
	kind     string
	status   int
	details  string
	failOpen bool // failure_mode_allow turns it into "continue unprocessed"
}

func (e *localError) Error() string { return e.kind + ": " + e.details }

// downstreamError is a failure to write to the client.
type downstreamError struct{ err error }

func (e *downstreamError) Error() string { return fmt.Sprintf("write downstream: %v", e.err) }
func (e *downstreamError) Unwrap() error { return e.err }

// errStopped unwinds the exchange after its response was already decided.
var errStopped = errors.New("exchange stopped")
