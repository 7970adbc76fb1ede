package envoytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// downstream is where the client-visible response goes: a recorder for
// [Filter.Do], an http.ResponseWriter for [Proxy].
type downstream interface {
	writeHeader(status int, h http.Header) error
	write(p []byte) error
	writeTrailers(h http.Header) error
}

// downstreamRequest is a request as Envoy's codec hands it to the filter.
type downstreamRequest struct {
	method, path, authority, scheme string
	headers                         headerList
	body                            bodySource
	hasBody                         bool
	trailers                        func() headerList
}

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

// commonOf returns the CommonResponse of a headers or body reply.
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

// exchange is one HTTP exchange through the filter: Envoy's ext_proc Filter
// with its two ProcessorStates.
type exchange struct {
	f       *Filter
	cfg     *filterv3.ProcessingMode // configured mode
	mode    *filterv3.ProcessingMode // effective mode
	timeout time.Duration
	limit   int
	out     downstream
	res     *Result
	mu      mutator

	st   *procStream
	done bool // Envoy's processing_complete_: no more messages

	respSide  *side
	committed bool   // response headers went downstream
	pending   []byte // response body held until the headers go
	emitted   int    // response body bytes the client got
}

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

// run is the state machine shared by [Filter.Do] and [Proxy].
func (f *Filter) run(ctx context.Context, d *downstreamRequest, up Upstream, out downstream) (*Result, error) {
	if f.Client == nil {
		return nil, fmt.Errorf("run: %w: nil Client", ErrInvalid)
	}
	x := &exchange{f: f, timeout: f.MessageTimeout, limit: f.BufferLimit, out: out, res: &Result{}}
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

func (x *exchange) exchange(ctx context.Context, d *downstreamRequest, up Upstream) error {
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
	req := &side{
		headers:    append(headerList{{":authority", authority}, {":path", path}, {":method", method}, {":scheme", scheme}}, d.headers...),
		hadBody:    d.hasBody,
		hasBody:    d.hasBody,
		trailersFn: d.trailers,
	}
	if err := x.headersPhase(ctx, req); err != nil {
		return err
	}
	var body []byte
	if err := x.bodyPhase(ctx, req, d.body, func(p []byte) error { body = append(body, p...); return nil }); err != nil {
		return err
	}
	if err := x.trailersPhase(ctx, req); err != nil {
		return err
	}
	if cl, ok := req.headers.contentLength(); ok && req.hasBody && cl != len(body) {
		return &localError{kind: LocalStreamedRequestContentLength, status: http.StatusInternalServerError,
			details: fmt.Sprintf("request content-length %d, body %d bytes", cl, len(body))}
	}
	if !x.responseNeedsProcessor() {
		// Envoy (since 1.37) half-closes once nothing more is needed.
		if err := x.finishStream(ctx); err != nil {
			return err
		}
	}

	ureq := &UpstreamRequest{Headers: req.headers.http(), Body: body}
	ureq.Method, _ = req.headers.get(":method")
	ureq.Path, _ = req.headers.get(":path")
	ureq.Authority, _ = req.headers.get(":authority")
	ureq.Scheme, _ = req.headers.get(":scheme")
	if len(req.trailers) > 0 {
		ureq.Trailers = req.trailers.http()
	}
	x.res.UpstreamRequest = ureq
	resp, err := up(ctx, ureq)
	if err == nil && resp == nil {
		err = errors.New("upstream returned no response")
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		x.res.UpstreamErr = err
		body := []byte("upstream connect error or disconnect/reset before headers. reset reason: connection failure")
		resp = &UpstreamResponse{
			Status: http.StatusServiceUnavailable,
			Headers: http.Header{"Content-Type": {"text/plain"},
				"Content-Length": {strconv.Itoa(len(body))}},
			Body: [][]byte{body},
		}
	}
	if c, ok := resp.Reader.(io.Closer); ok {
		defer c.Close()
	}
	return x.response(ctx, resp)
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

// call sends m and waits for its reply. It returns the reply when it carries
// the wanted oneof; (nil, nil) when the message goes unprocessed (processing
// already complete, observability mode, the server closed the stream, or
// failure_mode_allow swallowed an error); an error when the exchange ends here.
func (x *exchange) call(ctx context.Context, m *extprocv3.ProcessingRequest, want phase) (*extprocv3.ProcessingResponse, error) {
	if sent, err := x.post(ctx, m); !sent || err != nil {
		return nil, err
	}
	if x.f.ObservabilityMode {
		return nil, nil // no reply expected; any reply is dropped at the end
	}
	r, err := x.await(ctx, want, x.timed())
	if r == nil || err != nil {
		return nil, err
	}
	return x.accept(r, want)
}

// post sends m, opening the stream on the first message. sent is false when
// processing is complete or the stream could not be opened.
func (x *exchange) post(ctx context.Context, m *extprocv3.ProcessingRequest) (sent bool, err error) {
	if x.done {
		return false, nil
	}
	if x.st == nil {
		st, err := openStream(ctx, x.f.Client)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, x.failure(&localError{kind: LocalGRPCError, status: http.StatusInternalServerError,
				details: err.Error(), failOpen: true})
		}
		x.st = st
		x.res.StreamOpened = true
		m.ProtocolConfig = &extprocv3.ProtocolConfiguration{
			RequestBodyMode:  x.cfg.GetRequestBodyMode(),
			ResponseBodyMode: x.cfg.GetResponseBodyMode(),
		}
	}
	m.ObservabilityMode = x.f.ObservabilityMode
	x.res.Sent = append(x.res.Sent, m)
	// A send error means the stream ended; the receiver reports how.
	x.st.send(m)
	return true, nil
}

// timed reports whether replies run under the message timer: not when the
// filter is configured with FULL_DUPLEX_STREAMED, which has none.
func (x *exchange) timed() bool { return !x.duplexConfigured() }

// await reads the next reply, applying override_message_timeout. It returns
// (nil, nil) when the exchange goes on unprocessed, an error when it ends.
func (x *exchange) await(ctx context.Context, want phase, timed bool) (*extprocv3.ProcessingResponse, error) {
	timeout := x.timeout
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	expired := timer.C
	if !timed {
		expired = nil
	}
	extended := false
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-expired:
			return nil, x.failure(&localError{kind: LocalTimeout, status: http.StatusGatewayTimeout,
				details:  fmt.Sprintf("no reply to %s within %v (ext_proc_error_per-message_timeout_exceeded)", want, timeout),
				failOpen: true})
		case r := <-x.st.msgs:
			if r.err != nil {
				return nil, x.streamEnded(ctx, r.err, want)
			}
			x.res.Received = append(x.res.Received, r.msg)
			if d := r.msg.GetOverrideMessageTimeout(); d != nil {
				if x.extendTimer(timer, d, &extended) {
					timeout = d.AsDuration()
				}
				continue
			}
			return r.msg, nil
		}
	}
}

// extendTimer applies override_message_timeout as Envoy's onNewTimeout: once
// per message, within [1ms, max_message_timeout].
func (x *exchange) extendTimer(t *time.Timer, d *durationpb.Duration, extended *bool) bool {
	v := d.AsDuration()
	switch {
	case x.f.MaxMessageTimeout <= 0:
		x.res.note("override_message_timeout %v ignored: max_message_timeout not set", v)
	case v < time.Millisecond || v > x.f.MaxMessageTimeout:
		x.res.note("override_message_timeout %v ignored: out of [1ms, %v]", v, x.f.MaxMessageTimeout)
	case *extended:
		x.res.note("override_message_timeout %v ignored: timer already restarted for this message", v)
	default:
		*extended = true
		t.Reset(v)
		return true
	}
	return false
}

// accept checks a reply against the reply rule.
func (x *exchange) accept(r *extprocv3.ProcessingResponse, want phase) (*extprocv3.ProcessingResponse, error) {
	got := replyPhase(r)
	if got == phaseImmediate {
		return nil, x.immediate(r.GetImmediateResponse())
	}
	if got != want {
		return nil, x.failure(&localError{kind: LocalSpurious, status: http.StatusInternalServerError,
			details: fmt.Sprintf("got %s while waiting for %s", got, want), failOpen: true})
	}
	if CommonOf(r).GetBodyMutation().GetStreamedResponse() != nil {
		return nil, x.failure(&localError{kind: LocalSpurious, status: http.StatusInternalServerError,
			details: fmt.Sprintf("%s carries body_mutation.streamed_response outside FULL_DUPLEX_STREAMED", got), failOpen: true})
	}
	if o := r.GetModeOverride(); o != nil {
		switch {
		case !want.isHeaders():
			x.res.note("mode_override in a %s reply ignored", got)
		case !x.f.AllowModeOverride:
			x.res.note("mode_override ignored: allow_mode_override is false")
		case x.duplexConfigured():
			x.res.note("mode_override ignored: FULL_DUPLEX_STREAMED is configured")
		default:
			if err := x.override(o); err != nil {
				x.closeStream()
				return nil, err
			}
		}
	}
	return r, nil
}

// streamEnded handles the end of the Process stream while a reply was due.
func (x *exchange) streamEnded(ctx context.Context, err error, want phase) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, io.EOF) {
		x.res.note("server ended the stream before replying to %s; continuing without the processor", want)
		x.closeStream()
		return nil
	}
	x.res.StreamErr = err
	st := status.Convert(err)
	return x.failure(&localError{kind: LocalGRPCError, status: http.StatusInternalServerError,
		details:  fmt.Sprintf("ext_proc_error_gRPC_error_%d{%s} while waiting for %s", st.Code(), st.Message(), want),
		failOpen: true})
}

// failure ends processing after an error: the exchange continues unprocessed
// under failure_mode_allow when the error allows it, or ends with le.
func (x *exchange) failure(le *localError) error {
	x.closeStream()
	if le.failOpen && x.f.FailureModeAllow {
		x.res.FailedOpen = true
		x.res.note("failure_mode_allow: %s (%s); continuing without the processor", le.kind, le.details)
		return nil
	}
	return le
}

// fatal ends the exchange with a local reply failure_mode_allow cannot avoid.
func (x *exchange) fatal(kind string, code int, details string) error {
	x.closeStream()
	return &localError{kind: kind, status: code, details: details}
}

func (x *exchange) mutate(h *headerList, m *extprocv3.HeaderMutation, replacing, dropCL bool, where string) error {
	o := mutation{where: where, replacing: replacing, dropContentLength: dropCL}
	if err := x.mu.apply(h, m, o); err != nil {
		return x.fatal(LocalInvalidMutation, http.StatusInternalServerError, err.Error())
	}
	return nil
}

func (x *exchange) closeStream() {
	x.done = true
	if x.st != nil {
		x.st.close()
	}
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

// next reads a chunk; a failing upstream body becomes Envoy's reset.
func (x *exchange) next(ctx context.Context, s *side, src bodySource) ([]byte, bool, error) {
	c, last, err := src.next(ctx)
	var re *upstreamReadError
	if s.resp && errors.As(err, &re) {
		return nil, false, x.fatal(LocalUpstreamReset, http.StatusServiceUnavailable, re.Error())
	}
	return c, last, err
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
		c, last, err := x.next(ctx, s, src)
		if err != nil {
			return err
		}
		if last {
			s.loadTrailers()
		}
		eos := last && len(s.trailers) == 0
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

func (x *exchange) trailersPhase(ctx context.Context, s *side) error {
	s.loadTrailers()
	if x.done || s.duplexed || !x.trailerSend(s) || (len(s.trailers) == 0 && !s.hadBody) {
		return nil
	}
	r, err := x.call(ctx, s.trailersMessage(), s.phase(phaseRequestTrailers))
	if err != nil || r == nil {
		return err
	}
	var hm *extprocv3.HeaderMutation
	switch v := r.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestTrailers:
		hm = v.RequestTrailers.GetHeaderMutation()
	case *extprocv3.ProcessingResponse_ResponseTrailers:
		hm = v.ResponseTrailers.GetHeaderMutation()
	}
	if hm != nil {
		return x.mutate(&s.trailers, hm, false, false, s.name()+" trailers reply")
	}
	return nil
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
