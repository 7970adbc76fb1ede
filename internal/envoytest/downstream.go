package envoytest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// downstream is where the client-visible response goes: a recorder for
// [Filter.Do], an http.ResponseWriter for [Proxy].
type downstream interface {
	writeHeader(status int, h http.Header) error
	write(p []byte) error
	writeTrailers(h http.Header) error
}

// emit sends response body bytes downstream, or holds them until the headers go.
func (x *exchange) emit(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	if !x.committed {
		x.pending = append(x.pending, p...)
		return nil
	}
	return x.write(p)
}

func (x *exchange) write(p []byte) error {
	x.res.Body = append(x.res.Body, p...)
	x.res.Chunks = append(x.res.Chunks, bytes.Clone(p))
	x.emitted += len(p)
	if err := x.out.write(p); err != nil {
		return &downstreamError{err}
	}
	return nil
}

// commit sends the response headers downstream.
func (x *exchange) commit() error {
	if x.committed {
		return nil
	}
	return x.commitWith(x.respSide.headers)
}

func (x *exchange) commitWith(h headerList) error {
	code := http.StatusOK
	if v, ok := h.get(":status"); ok {
		if n, err := strconv.Atoi(v); err == nil {
			code = n
		}
	}
	x.committed = true
	x.res.Status = code
	x.res.Headers = h.http()
	if err := x.out.writeHeader(code, x.res.Headers.Clone()); err != nil {
		return &downstreamError{err}
	}
	if p := x.pending; len(p) > 0 {
		x.pending = nil
		return x.write(p)
	}
	return nil
}

// end finishes a response that went through the filter.
func (x *exchange) end(ctx context.Context) error {
	if err := x.finishStream(ctx); err != nil {
		return err
	}
	if err := x.commit(); err != nil {
		return err
	}
	s := x.respSide
	if cl, ok := s.headers.contentLength(); ok && s.hasBody && cl != x.emitted {
		return x.fatal(LocalStreamedContentLength, http.StatusInternalServerError,
			fmt.Sprintf("response content-length %d, client got %d bytes", cl, x.emitted))
	}
	if len(s.trailers) > 0 {
		x.res.Trailers = s.trailers.http()
		if err := x.out.writeTrailers(x.res.Trailers.Clone()); err != nil {
			return &downstreamError{err}
		}
	}
	return nil
}

// immediate applies an ImmediateResponse as Filter::sendImmediateResponse.
func (x *exchange) immediate(ir *extprocv3.ImmediateResponse) error {
	x.closeStream()
	x.res.Immediate = true
	x.res.ImmediateDetails = ir.GetDetails()
	if x.committed {
		x.res.Reset = true
		x.res.LocalError = LocalResetAfterHeaders
		x.res.Details = "immediate_response after the response headers went downstream"
		return errStopped
	}
	code := http.StatusOK
	if ir.GetStatus() != nil && int(ir.GetStatus().GetCode()) >= 200 {
		code = int(ir.GetStatus().GetCode())
	}
	h := headerList{{":status", strconv.Itoa(code)}}
	if hm := ir.GetHeaders(); hm != nil {
		// Envoy logs and skips what the rules refuse, and still answers.
		if err := x.mu.apply(&h, hm, mutation{where: "immediate_response", skipDisallowed: true}); err != nil {
			return &localError{kind: LocalInvalidMutation, status: http.StatusInternalServerError, details: err.Error()}
		}
	}
	body := ir.GetBody()
	if _, ok := h.get("content-type"); !ok && len(body) > 0 {
		h.set("content-type", "text/plain")
	}
	h.set("content-length", strconv.Itoa(len(body)))
	x.pending = nil
	if err := x.commitWith(h); err != nil {
		return err
	}
	if len(body) > 0 {
		if err := x.write(body); err != nil {
			return err
		}
	}
	return errStopped
}

// localReply answers the client for Envoy after a local error, or resets the
// stream when the response headers already went out.
func (x *exchange) localReply(le *localError) error {
	x.closeStream()
	x.res.LocalError = le.kind
	x.res.Details = le.details
	if x.committed {
		x.res.Reset = true
		return nil
	}
	x.pending = nil
	return x.commitWith(headerList{{":status", strconv.Itoa(le.status)}, {"content-length", "0"}})
}
