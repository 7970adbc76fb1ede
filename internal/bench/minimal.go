package bench

import (
	"errors"
	"fmt"
	"io"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Minimal is the baseline: an ExternalProcessor that does nothing but answer
// CONTINUE (an empty reply of the matching kind) to every message. Its
// request-headers reply carries a mode_override with both body modes set,
// so that it reads what the sidecar reads: with [NewMinimal]'s usual
// arguments, the whole request body (BUFFERED) and no response body (NONE),
// like the sidecar on a request no plugin applies to. Its replies are built
// once and shared by all streams, so it allocates nothing of its own.
type Minimal struct {
	extprocv3.UnimplementedExternalProcessorServer
	reqHeaders, reqBody, reqTrailers    *extprocv3.ProcessingResponse
	respHeaders, respBody, respTrailers *extprocv3.ProcessingResponse
}

// NewMinimal returns a Minimal whose request-headers reply asks for
// requestBody and responseBody.
func NewMinimal(requestBody, responseBody filterv3.ProcessingMode_BodySendMode) *Minimal {
	return &Minimal{
		reqHeaders: &extprocv3.ProcessingResponse{
			Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}},
			ModeOverride: &filterv3.ProcessingMode{
				RequestBodyMode:  requestBody,
				ResponseBodyMode: responseBody,
			},
		},
		reqBody:      &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}},
		reqTrailers:  &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}},
		respHeaders:  &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}},
		respBody:     &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}},
		respTrailers: &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}},
	}
}

// NewNothing returns the do-nothing baseline: a Minimal that asks for no
// body at all (no mode_override), so Envoy's default modes apply: request
// headers and response headers, nothing else. It is the floor any ext_proc
// server pays: two messages per exchange.
func NewNothing() *Minimal {
	m := NewMinimal(filterv3.ProcessingMode_NONE, filterv3.ProcessingMode_NONE)
	m.reqHeaders = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}}
	return m
}

// Process implements [extprocv3.ExternalProcessorServer.Process].
func (m *Minimal) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := srv.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return fmt.Errorf("receive: %w", err)
		}
		var r *extprocv3.ProcessingResponse
		switch req.GetRequest().(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			r = m.reqHeaders
		case *extprocv3.ProcessingRequest_RequestBody:
			r = m.reqBody
		case *extprocv3.ProcessingRequest_RequestTrailers:
			r = m.reqTrailers
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			r = m.respHeaders
		case *extprocv3.ProcessingRequest_ResponseBody:
			r = m.respBody
		case *extprocv3.ProcessingRequest_ResponseTrailers:
			r = m.respTrailers
		default:
			return status.Errorf(codes.Unimplemented, "unknown message %T", req.GetRequest())
		}
		if err := srv.Send(r); err != nil {
			return fmt.Errorf("send: %w", err)
		}
	}
}
