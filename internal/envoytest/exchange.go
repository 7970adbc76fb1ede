package envoytest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
)

// downstreamRequest is a request as Envoy's codec hands it to the filter.
type downstreamRequest struct {
	method, path, authority, scheme string
	headers                         headerList
	body                            bodySource
	hasBody                         bool
	trailers                        func() headerList
	info                            *StreamInfo // nil: none
	// bufferLimit, when set, lowers the stream's buffer limit (a filter
	// before ext_proc called setBufferLimit: mcpfilter.go).
	bufferLimit int
}

// exchange is one HTTP exchange through the filter: Envoy's ext_proc Filter
// with its two ProcessorStates.
type exchange struct {
	f       *Filter
	client  extprocv3.ExternalProcessorClient // the server of this stream
	cfg     *filterv3.ProcessingMode          // configured mode
	mode    *filterv3.ProcessingMode          // effective mode
	timeout time.Duration
	limit   int
	out     downstream
	res     *Result
	mu      mutator

	st   *procStream
	done bool         // Envoy's processing_complete_: no more messages
	env  envoyContext // metadata and attributes to send (envoycontext.go)

	respSide  *side
	committed bool   // response headers went downstream
	pending   []byte // response body held until the headers go
	emitted   int    // response body bytes the client got
}

// run is the state machine shared by [Filter.Do] and [Proxy].
func (f *Filter) run(ctx context.Context, d *downstreamRequest, up Upstream, out downstream) (*Result, error) {
	client, server := f.pick()
	if client == nil {
		return nil, fmt.Errorf("run: %w: nil Client", ErrInvalid)
	}
	x := &exchange{f: f, client: client, timeout: f.MessageTimeout, limit: f.BufferLimit, out: out, res: &Result{Server: server}}
	x.mu = mutator{disallowIsError: f.DisallowIsError, res: x.res}
	if x.timeout <= 0 {
		x.timeout = DefaultMessageTimeout
	}
	if x.limit <= 0 {
		x.limit = DefaultBufferLimit
	}
	x.cfg = defaultMode()
	if f.Mode != nil {
		x.cfg = proto.Clone(f.Mode).(*filterv3.ProcessingMode)
	}
	if err := checkConfig(x.cfg); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	x.mode = proto.Clone(x.cfg).(*filterv3.ProcessingMode)
	defer x.closeStream()

	err := x.exchange(ctx, d, up)
	var le *localError
	switch {
	case err == nil || errors.Is(err, errStopped):
	case errors.As(err, &le):
		if err := x.localReply(le); err != nil {
			return x.res, err
		}
	default:
		return x.res, err
	}
	return x.res, nil
}

// exchange runs the request through the filter, calls the upstream and runs
// its response through the filter.
func (x *exchange) exchange(ctx context.Context, d *downstreamRequest, up Upstream) error {
	x.env.info = d.info
	if d.bufferLimit > 0 && d.bufferLimit < x.limit {
		x.limit = d.bufferLimit
	}
	req := requestSide(d)
	body, err := x.request(ctx, req, d.body)
	if err != nil {
		return err
	}
	if !x.responseNeedsProcessor() {
		// Envoy (since 1.37) half-closes once nothing more is needed.
		if err := x.finishStream(ctx); err != nil {
			return err
		}
	}
	resp, err := x.upstream(ctx, up, upstreamRequest(req, body))
	if err != nil {
		return err
	}
	if c, ok := resp.Reader.(io.Closer); ok {
		defer c.Close()
	}
	return x.response(ctx, resp)
}

// requestSide is the request direction of d, with the pseudo-headers Envoy's
// codec adds (defaults where d leaves them empty).
func requestSide(d *downstreamRequest) *side {
	method, path, scheme, authority := d.method, d.path, d.scheme, d.authority
	if method == "" {
		method = http.MethodGet
	}
	if path == "" {
		path = "/"
	}
	if scheme == "" {
		scheme = "http"
	}
	if authority == "" {
		authority = "localhost"
	}
	return &side{
		headers:    append(headerList{{":authority", authority}, {":path", path}, {":method", method}, {":scheme", scheme}}, d.headers...),
		hadBody:    d.hasBody,
		hasBody:    d.hasBody,
		trailersFn: d.trailers,
	}
}

// request runs the request's headers, body and trailers through the filter
// and returns the body the upstream gets.
func (x *exchange) request(ctx context.Context, req *side, src bodySource) ([]byte, error) {
	if err := x.headersPhase(ctx, req); err != nil {
		return nil, err
	}
	var body []byte
	if err := x.bodyPhase(ctx, req, src, func(p []byte) error { body = append(body, p...); return nil }); err != nil {
		return nil, err
	}
	if err := x.trailersPhase(ctx, req); err != nil {
		return nil, err
	}
	if cl, ok := req.headers.contentLength(); ok && req.hasBody && cl != len(body) {
		return nil, &localError{kind: LocalStreamedRequestContentLength, status: http.StatusInternalServerError,
			details: fmt.Sprintf("request content-length %d, body %d bytes", cl, len(body))}
	}
	return body, nil
}

// upstreamRequest is the request as the filter passes it on.
func upstreamRequest(req *side, body []byte) *UpstreamRequest {
	ureq := &UpstreamRequest{Headers: req.headers.http(), Body: body}
	ureq.Method, _ = req.headers.get(":method")
	ureq.Path, _ = req.headers.get(":path")
	ureq.Authority, _ = req.headers.get(":authority")
	ureq.Scheme, _ = req.headers.get(":scheme")
	if len(req.trailers) > 0 {
		ureq.Trailers = req.trailers.http()
	}
	return ureq
}

// upstream calls up; a failed call becomes the 503 Envoy's router answers
// with when the upstream cannot be reached.
func (x *exchange) upstream(ctx context.Context, up Upstream, ureq *UpstreamRequest) (*UpstreamResponse, error) {
	x.res.UpstreamRequest = ureq
	resp, err := up(ctx, ureq)
	if err == nil && resp == nil {
		err = errors.New("upstream returned no response")
	}
	if err == nil {
		return resp, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	x.res.UpstreamErr = err
	body := []byte("upstream connect error or disconnect/reset before headers. reset reason: connection failure")
	return &UpstreamResponse{
		Status: http.StatusServiceUnavailable,
		Headers: http.Header{"Content-Type": {"text/plain"},
			"Content-Length": {strconv.Itoa(len(body))}},
		Body: [][]byte{body},
	}, nil
}

func (x *exchange) response(ctx context.Context, resp *UpstreamResponse) error {
	code := resp.Status
	if code == 0 {
		code = http.StatusOK
	}
	src, hasBody := responseSource(resp)
	s := &side{
		resp:       true,
		headers:    append(headerList{{":status", strconv.Itoa(code)}}, headersFromHTTP(resp.Headers)...),
		hadBody:    hasBody,
		hasBody:    hasBody,
		trailersFn: func() headerList { return headersFromHTTP(resp.Trailers) },
	}
	x.respSide = s
	if err := x.headersPhase(ctx, s); err != nil {
		return err
	}
	if s.hasBody && !s.replaced {
		// Headers go downstream now unless Envoy holds them for the body.
		switch m := x.bodyMode(s); {
		case x.done, m == filterv3.ProcessingMode_NONE, m == filterv3.ProcessingMode_STREAMED,
			m == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED:
			if err := x.commit(); err != nil {
				return err
			}
		}
	}
	if err := x.bodyPhase(ctx, s, src, x.emit); err != nil {
		return err
	}
	if err := x.trailersPhase(ctx, s); err != nil {
		return err
	}
	return x.end(ctx)
}

func (x *exchange) headersPhase(ctx context.Context, s *side) error {
	where := s.name() + " headers reply"
	if !x.headerSend(s) || x.done {
		if !x.done && dropsContentLength(x.mode, s) {
			s.headers.del("content-length")
		}
		return nil
	}
	old := x.mode
	sent := len(x.res.Sent)
	r, err := x.call(ctx, s.headersMessage(), s.phase(phaseRequestHeaders))
	if err != nil {
		return err
	}
	// Envoy removes content-length right after sending the headers, under
	// the mode it had then: a mode_override in the reply comes too late.
	if len(x.res.Sent) > sent && dropsContentLength(old, s) {
		s.headers.del("content-length")
	}
	if r == nil {
		return nil
	}
	s.sentHeaders = true
	cr := CommonOf(r)
	replacing := cr.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE
	if hm := cr.GetHeaderMutation(); hm != nil {
		if err := x.mutate(&s.headers, hm, replacing, dropsContentLength(x.mode, s), where); err != nil {
			return err
		}
	}
	if replacing {
		if bm := cr.GetBodyMutation(); bm != nil {
			s.headers.del("content-length")
			s.replaced = true
			s.hasBody = true
			s.replacement = applyBody(bm, nil)
		}
		x.stopDirection(s)
	} else if cr.GetBodyMutation() != nil {
		x.res.note("%s: body_mutation ignored without CONTINUE_AND_REPLACE", where)
	}
	return nil
}

func (x *exchange) trailersPhase(ctx context.Context, s *side) error {
	s.loadTrailers()
	if x.done || s.duplexed || !x.trailerSend(s) || (len(s.trailers) == 0 && !s.hadBody) {
		return nil
	}
	r, err := x.call(ctx, s.trailersMessage(), s.phase(phaseRequestTrailers))
	if err != nil || r == nil {
		return err
	}
	if hm := trailersMutation(r); hm != nil {
		return x.mutate(&s.trailers, hm, false, false, s.name()+" trailers reply")
	}
	return nil
}
