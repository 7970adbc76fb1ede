package envoytest

import (
	"fmt"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/protobuf/proto"
)

func defaultMode() *filterv3.ProcessingMode {
	return &filterv3.ProcessingMode{
		RequestHeaderMode:   filterv3.ProcessingMode_SEND,
		ResponseHeaderMode:  filterv3.ProcessingMode_SEND,
		RequestBodyMode:     filterv3.ProcessingMode_NONE,
		ResponseBodyMode:    filterv3.ProcessingMode_NONE,
		RequestTrailerMode:  filterv3.ProcessingMode_SKIP,
		ResponseTrailerMode: filterv3.ProcessingMode_SKIP,
	}
}

func checkBodyModes(m *filterv3.ProcessingMode) error {
	for _, b := range []filterv3.ProcessingMode_BodySendMode{m.GetRequestBodyMode(), m.GetResponseBodyMode()} {
		switch b {
		case filterv3.ProcessingMode_NONE, filterv3.ProcessingMode_STREAMED,
			filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_BUFFERED_PARTIAL:
		default:
			return fmt.Errorf("body mode %v: %w", b, ErrUnsupported)
		}
	}
	return nil
}

// Mode accessors, per direction, as ProcessorState::setProcessingModeInternal
// reads them: DEFAULT headers mean SEND, DEFAULT trailers mean SKIP.

func (x *exchange) headerSend(s *side) bool {
	if s.resp {
		return x.mode.GetResponseHeaderMode() != filterv3.ProcessingMode_SKIP
	}
	return x.mode.GetRequestHeaderMode() != filterv3.ProcessingMode_SKIP
}

func (x *exchange) trailerSend(s *side) bool {
	if s.resp {
		return x.mode.GetResponseTrailerMode() == filterv3.ProcessingMode_SEND
	}
	return x.mode.GetRequestTrailerMode() == filterv3.ProcessingMode_SEND
}

func (x *exchange) bodyMode(s *side) filterv3.ProcessingMode_BodySendMode {
	return bodyModeIn(x.mode, s)
}

func bodyModeIn(m *filterv3.ProcessingMode, s *side) filterv3.ProcessingMode_BodySendMode {
	if s.resp {
		return m.GetResponseBodyMode()
	}
	return m.GetRequestBodyMode()
}

// dropsContentLength is ProcessorState::shouldRemoveContentLength under mode m.
func dropsContentLength(m *filterv3.ProcessingMode, s *side) bool {
	hm := m.GetRequestHeaderMode()
	if s.resp {
		hm = m.GetResponseHeaderMode()
	}
	switch bodyModeIn(m, s) {
	case filterv3.ProcessingMode_STREAMED, filterv3.ProcessingMode_BUFFERED_PARTIAL, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED:
		return true
	case filterv3.ProcessingMode_BUFFERED:
		return hm == filterv3.ProcessingMode_SKIP
	}
	return false
}

func (x *exchange) responseNeedsProcessor() bool {
	r := &side{resp: true}
	return x.headerSend(r) || x.bodyMode(r) != filterv3.ProcessingMode_NONE || x.trailerSend(r)
}

// stopDirection applies CONTINUE_AND_REPLACE's "nothing more in this direction".
func (x *exchange) stopDirection(s *side) {
	if s.resp {
		x.mode.ResponseBodyMode = filterv3.ProcessingMode_NONE
		x.mode.ResponseTrailerMode = filterv3.ProcessingMode_SKIP
	} else {
		x.mode.RequestBodyMode = filterv3.ProcessingMode_NONE
		x.mode.RequestTrailerMode = filterv3.ProcessingMode_SKIP
	}
}

// override applies a mode_override as Envoy's effectiveModeOverride: DEFAULT
// header and trailer modes fall back to the configured ones, both body modes
// are taken literally.
func (x *exchange) override(o *filterv3.ProcessingMode) error {
	n := proto.Clone(x.cfg).(*filterv3.ProcessingMode)
	if o.GetRequestHeaderMode() != filterv3.ProcessingMode_DEFAULT {
		n.RequestHeaderMode = o.GetRequestHeaderMode()
	}
	if o.GetResponseHeaderMode() != filterv3.ProcessingMode_DEFAULT {
		n.ResponseHeaderMode = o.GetResponseHeaderMode()
	}
	if o.GetRequestTrailerMode() != filterv3.ProcessingMode_DEFAULT {
		n.RequestTrailerMode = o.GetRequestTrailerMode()
	}
	if o.GetResponseTrailerMode() != filterv3.ProcessingMode_DEFAULT {
		n.ResponseTrailerMode = o.GetResponseTrailerMode()
	}
	n.RequestBodyMode = o.GetRequestBodyMode()
	n.ResponseBodyMode = o.GetResponseBodyMode()
	if err := checkBodyModes(n); err != nil {
		return fmt.Errorf("mode_override: %w", err)
	}
	x.mode = n
	return nil
}
