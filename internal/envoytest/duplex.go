package envoytest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
)

const fullDuplex = filterv3.ProcessingMode_FULL_DUPLEX_STREAMED

// checkConfig is the filter's config validation: FULL_DUPLEX_STREAMED needs
// the matching trailer mode SEND; GRPC body mode is not modelled.
func checkConfig(m *filterv3.ProcessingMode) error {
	if m.GetRequestBodyMode() == fullDuplex && m.GetRequestTrailerMode() != filterv3.ProcessingMode_SEND {
		return fmt.Errorf("config: %w: request FULL_DUPLEX_STREAMED needs request_trailer_mode SEND", ErrInvalid)
	}
	if m.GetResponseBodyMode() == fullDuplex && m.GetResponseTrailerMode() != filterv3.ProcessingMode_SEND {
		return fmt.Errorf("config: %w: response FULL_DUPLEX_STREAMED needs response_trailer_mode SEND", ErrInvalid)
	}
	n := &filterv3.ProcessingMode{RequestBodyMode: m.GetRequestBodyMode(), ResponseBodyMode: m.GetResponseBodyMode()}
	if n.RequestBodyMode == fullDuplex {
		n.RequestBodyMode = filterv3.ProcessingMode_STREAMED
	}
	if n.ResponseBodyMode == fullDuplex {
		n.ResponseBodyMode = filterv3.ProcessingMode_STREAMED
	}
	return checkBodyModes(n)
}

// duplexConfigured reports whether the filter is configured with
// FULL_DUPLEX_STREAMED in either direction: then there is no message timer
// and mode_override is ignored.
func (x *exchange) duplexConfigured() bool {
	return x.cfg.GetRequestBodyMode() == fullDuplex || x.cfg.GetResponseBodyMode() == fullDuplex
}

// duplex runs a FULL_DUPLEX_STREAMED body. Envoy sends every chunk as it
// arrives without waiting for replies, then the trailers (when there are
// any; the body message before them carries no end_of_stream). The server
// answers with any number of body replies carrying
// body_mutation.streamed_response, which replace the body; the body ends with
// a streamed_response marked end_of_stream, or with the trailers reply when
// trailers were sent. A plain body mutation, or any other oneof, is spurious.
func (x *exchange) duplex(ctx context.Context, s *side, src bodySource, emit func([]byte) error) error {
	s.duplexed = true
	for {
		c, last, eos, err := x.chunk(ctx, s, src)
		if err != nil {
			return err
		}
		if !last || len(c) > 0 || eos {
			if _, err := x.post(ctx, s.bodyMessage(c, eos)); err != nil {
				return err
			}
		}
		if last {
			break
		}
	}
	withTrailers := len(s.trailers) > 0
	if withTrailers {
		if _, err := x.post(ctx, s.trailersMessage()); err != nil {
			return err
		}
	}
	if x.done || x.f.ObservabilityMode {
		return nil
	}
	return x.duplexReplies(ctx, s, withTrailers, emit)
}

// duplexReplies reads the replies to a FULL_DUPLEX_STREAMED body.
func (x *exchange) duplexReplies(ctx context.Context, s *side, withTrailers bool, emit func([]byte) error) error {
	body, trailers := s.phase(phaseRequestBody), s.phase(phaseRequestTrailers)
	for {
		r, err := x.await(ctx, body, false)
		if err != nil {
			return err
		}
		if r == nil {
			// A clean end of the stream: the chunks already given to the
			// server are gone.
			return x.fatal(LocalGRPCError, http.StatusInternalServerError,
				"stream ended with a FULL_DUPLEX_STREAMED body outstanding")
		}
		switch got := replyPhase(r); {
		case got == phaseImmediate:
			return x.immediate(r.GetImmediateResponse())
		case got == body:
			sr := CommonOf(r).GetBodyMutation().GetStreamedResponse()
			if sr == nil {
				return x.failure(&localError{kind: LocalSpurious, status: http.StatusInternalServerError,
					details: fmt.Sprintf("%s without body_mutation.streamed_response in FULL_DUPLEX_STREAMED", got), failOpen: true})
			}
			if err := emit(sr.GetBody()); err != nil {
				return err
			}
			if sr.GetEndOfStream() && !withTrailers {
				return nil
			}
		case got == trailers && withTrailers:
			if hm := trailersMutation(r); hm != nil {
				return x.mutate(&s.trailers, hm, false, false, s.name()+" trailers reply")
			}
			return nil
		default:
			return x.failure(&localError{kind: LocalSpurious, status: http.StatusInternalServerError,
				details: fmt.Sprintf("got %s while waiting for FULL_DUPLEX_STREAMED %s replies", got, body), failOpen: true})
		}
	}
}

// Deferred and graceful close.

// finishStream ends the stream once no more replies are due, as Envoy does.
// By default it half-closes and resets at once: the server sees io.EOF
// and/or codes.Canceled. With [Filter.GracefulClose], or in observability
// mode (Envoy's deferred close), it half-closes and waits for the server to
// end the stream; replies that arrive meanwhile are dropped, as Envoy drops
// replies after processing finished, and listed in Result.Ignored.
func (x *exchange) finishStream(ctx context.Context) error {
	if x.done {
		return nil
	}
	x.done = true
	if x.st == nil {
		return nil
	}
	defer x.closeStream()
	x.st.closeSend()
	wait := x.closeWait()
	if wait <= 0 {
		return nil
	}
	return x.drain(ctx, wait)
}

// closeWait is how long the fake waits for the server after the half-close.
func (x *exchange) closeWait() time.Duration {
	switch {
	case x.f.ObservabilityMode && x.f.DeferredCloseTimeout > 0:
		return x.f.DeferredCloseTimeout
	case x.f.ObservabilityMode:
		return DefaultDeferredCloseTimeout
	case x.f.GracefulClose:
		return GracefulCloseWait
	}
	return 0
}

// drain reads until the server ends the stream or wait elapses.
func (x *exchange) drain(ctx context.Context, wait time.Duration) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			x.res.note("server did not end the stream within %v of the half-close; reset it", wait)
			return nil
		case r := <-x.st.msgs:
			if r.err != nil {
				if !errors.Is(r.err, io.EOF) && ctx.Err() == nil {
					x.res.StreamErr = r.err
					x.res.note("server ended the stream with %v after the last message", r.err)
				}
				return nil
			}
			x.res.Received = append(x.res.Received, r.msg)
			x.res.Ignored = append(x.res.Ignored, r.msg)
			x.res.note("%s dropped: no reply was due", replyPhase(r.msg))
		}
	}
}
