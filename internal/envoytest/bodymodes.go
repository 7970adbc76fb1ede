package envoytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// next reads a chunk; a failing upstream body becomes Envoy's reset.
func (x *exchange) next(ctx context.Context, s *side, src bodySource) ([]byte, bool, error) {
	c, last, err := src.next(ctx)
	var re *upstreamReadError
	if s.resp && errors.As(err, &re) {
		return nil, false, x.fatal(LocalUpstreamReset, http.StatusServiceUnavailable, re.Error())
	}
	return c, last, err
}

// chunk reads the next chunk of a streamed body. At the last chunk it reads
// the trailers; eos reports whether the chunk's body message ends the
// stream, which it does not when trailers follow.
func (x *exchange) chunk(ctx context.Context, s *side, src bodySource) (c []byte, last, eos bool, err error) {
	c, last, err = x.next(ctx, s, src)
	if err != nil {
		return nil, false, false, err
	}
	if last {
		s.loadTrailers()
	}
	return c, last, last && len(s.trailers) == 0, nil
}

func (x *exchange) passThrough(ctx context.Context, s *side, src bodySource, emit func([]byte) error) error {
	for {
		c, last, err := x.next(ctx, s, src)
		if err != nil {
			return err
		}
		if err := emit(c); err != nil {
			return err
		}
		if last {
			return nil
		}
	}
}

func (x *exchange) bodyPhase(ctx context.Context, s *side, src bodySource, emit func([]byte) error) error {
	if s.replaced {
		if s.hadBody {
			if err := x.passThrough(ctx, s, src, func([]byte) error { return nil }); err != nil {
				return err
			}
		}
		return emit(s.replacement)
	}
	if !s.hasBody {
		return nil
	}
	switch mode := x.bodyMode(s); {
	case x.done, mode == filterv3.ProcessingMode_NONE:
		return x.passThrough(ctx, s, src, emit)
	case mode == filterv3.ProcessingMode_BUFFERED:
		return x.buffered(ctx, s, src, emit)
	case mode == filterv3.ProcessingMode_STREAMED:
		return x.streamed(ctx, s, src, emit)
	case mode == filterv3.ProcessingMode_BUFFERED_PARTIAL:
		return x.partial(ctx, s, src, emit)
	case mode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED:
		return x.duplex(ctx, s, src, emit)
	default:
		return fmt.Errorf("body mode %v: %w", mode, ErrUnsupported)
	}
}

func (x *exchange) overLimit(s *side) error {
	code := http.StatusRequestEntityTooLarge
	if s.resp {
		code = http.StatusInternalServerError
	}
	return x.fatal(LocalBufferLimit, code, fmt.Sprintf("%s body over %d bytes in BUFFERED mode", s.name(), x.limit))
}

func (x *exchange) buffered(ctx context.Context, s *side, src bodySource, emit func([]byte) error) error {
	var buf []byte
	for {
		c, last, err := x.next(ctx, s, src)
		if err != nil {
			return err
		}
		buf = append(buf, c...)
		if len(buf) > x.limit {
			return x.overLimit(s)
		}
		if last {
			break
		}
	}
	s.loadTrailers()
	// With trailers, the end of the body is the trailers message.
	r, err := x.call(ctx, s.bodyMessage(buf, len(s.trailers) == 0), s.phase(phaseRequestBody))
	if err != nil {
		return err
	}
	if r != nil {
		where := s.name() + " body reply"
		cr := CommonOf(r)
		if hm := cr.GetHeaderMutation(); hm != nil {
			if s.sentHeaders {
				if err := x.mutate(&s.headers, hm, false, dropsContentLength(x.mode, s), where); err != nil {
					return err
				}
			} else {
				x.res.note("%s: header_mutation ignored, headers were not sent to the processor", where)
			}
		}
		if bm := cr.GetBodyMutation(); bm != nil {
			if cl, ok := s.headers.contentLength(); ok && s.sentHeaders && cl != len(bm.GetBody()) {
				return x.fatal(LocalContentLengthMismatch, http.StatusInternalServerError,
					fmt.Sprintf("%s: content-length %d, mutated body %d bytes", where, cl, len(bm.GetBody())))
			}
			buf = applyBody(bm, buf)
		}
	}
	return emit(buf)
}

func (x *exchange) streamed(ctx context.Context, s *side, src bodySource, emit func([]byte) error) error {
	for {
		c, last, eos, err := x.chunk(ctx, s, src)
		if err != nil {
			return err
		}
		if last && len(c) == 0 && !eos {
			return nil // trailers follow; no empty data frame
		}
		r, err := x.call(ctx, s.bodyMessage(c, eos), s.phase(phaseRequestBody))
		if err != nil {
			return err
		}
		if r != nil {
			cr := CommonOf(r)
			if cr.GetHeaderMutation() != nil {
				x.res.note("%s body reply: header_mutation ignored in STREAMED mode", s.name())
			}
			if bm := cr.GetBodyMutation(); bm != nil {
				c = applyBody(bm, c)
			}
		}
		if err := emit(c); err != nil {
			return err
		}
		if last {
			return nil
		}
	}
}

func (x *exchange) partial(ctx context.Context, s *side, src bodySource, emit func([]byte) error) error {
	var buf []byte
	last := false
	for !last && len(buf) <= x.limit {
		c, l, err := x.next(ctx, s, src)
		if err != nil {
			return err
		}
		buf, last = append(buf, c...), l
	}
	if last {
		s.loadTrailers()
	}
	r, err := x.call(ctx, s.bodyMessage(buf, last && len(s.trailers) == 0), s.phase(phaseRequestBody))
	if err != nil {
		return err
	}
	if r != nil {
		where := s.name() + " body reply"
		cr := CommonOf(r)
		if hm := cr.GetHeaderMutation(); hm != nil && s.sentHeaders {
			if err := x.mutate(&s.headers, hm, false, dropsContentLength(x.mode, s), where); err != nil {
				return err
			}
		}
		if bm := cr.GetBodyMutation(); bm != nil {
			buf = applyBody(bm, buf)
		}
	}
	if err := emit(buf); err != nil {
		return err
	}
	if s.resp {
		if err := x.commit(); err != nil {
			return err
		}
	}
	if last {
		return nil
	}
	return x.passThrough(ctx, s, src, emit)
}

// applyBody is MutationUtils::applyBodyMutations.
func applyBody(m *extprocv3.BodyMutation, cur []byte) []byte {
	switch v := m.GetMutation().(type) {
	case *extprocv3.BodyMutation_Body:
		return bytes.Clone(v.Body)
	case *extprocv3.BodyMutation_ClearBody:
		if v.ClearBody {
			return nil
		}
	}
	return cur
}
