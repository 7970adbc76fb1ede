package envoytest

import (
	"bytes"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// side is one direction's state (Envoy's ProcessorState).
type side struct {
	resp         bool
	headers      headerList
	hadBody      bool // the message came with a body
	hasBody      bool // a body goes on (the original or a replacement)
	trailersFn   func() headerList
	trailers     headerList
	trailersRead bool
	sentHeaders  bool // a headers message was answered: BUFFERED body replies may mutate headers
	replaced     bool // CONTINUE_AND_REPLACE with a body mutation
	duplexed     bool // a FULL_DUPLEX_STREAMED body (and its trailers) went through
	replacement  []byte
}

func (s *side) name() string {
	if s.resp {
		return "response"
	}
	return "request"
}

func (s *side) phase(p phase) phase {
	if s.resp {
		return p + phaseResponseHeaders - phaseRequestHeaders
	}
	return p
}

func (s *side) loadTrailers() {
	if !s.trailersRead {
		s.trailersRead = true
		if s.trailersFn != nil {
			s.trailers = s.trailersFn()
		}
	}
}

func (s *side) headersMessage() *extprocv3.ProcessingRequest {
	s.loadTrailersIfKnown()
	h := &extprocv3.HttpHeaders{Headers: s.headers.proto(), EndOfStream: !s.hadBody && len(s.trailers) == 0}
	if s.resp {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: h}}
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: h}}
}

// loadTrailersIfKnown reads trailers early only when there is no body, so
// trailers that arrive after a streamed body are not read too soon.
func (s *side) loadTrailersIfKnown() {
	if !s.hadBody {
		s.loadTrailers()
	}
}

func (s *side) bodyMessage(b []byte, eos bool) *extprocv3.ProcessingRequest {
	body := &extprocv3.HttpBody{Body: bytes.Clone(b), EndOfStream: eos}
	if s.resp {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: body}}
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: body}}
}

func (s *side) trailersMessage() *extprocv3.ProcessingRequest {
	t := &extprocv3.HttpTrailers{Trailers: s.trailers.proto()}
	if s.resp {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{ResponseTrailers: t}}
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{RequestTrailers: t}}
}
