package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
)

// ErrProtocol is wrapped by [Driver.Do] errors caused by the server breaking
// the ext_proc contract (wrong oneof, extra reply, unexpected end), as
// opposed to transport failures.
var ErrProtocol = errors.New("ext_proc protocol violation")

// ErrUnsupported is wrapped by [Driver.Do] errors for a body mode the lean
// driver does not play (request STREAMED, BUFFERED_PARTIAL,
// FULL_DUPLEX_STREAMED, GRPC).
var ErrUnsupported = errors.New("not supported by the bench driver")

// Header is one HTTP header as Envoy sends it: lower-case key, raw value.
type Header struct{ Key, Value string }

// Exchange is one HTTP exchange as Envoy's filter sees it. There is no
// upstream: the response is given.
type Exchange struct {
	// RequestHeaders include the pseudo-headers (":method", ":path",
	// ":authority", ":scheme").
	RequestHeaders []Header
	// RequestBody is the whole request body; nil means none (end_of_stream
	// on the headers message).
	RequestBody []byte
	// ResponseHeaders include ":status".
	ResponseHeaders []Header
	// ResponseBody holds the chunks as the upstream delivers them; nil means
	// no body.
	ResponseBody [][]byte
}

// Outcome is what one exchange did.
type Outcome struct {
	// TTFB is the time from the first ext_proc message until the first
	// response body byte could go to the client (until the response headers
	// could, when the response has no body). Total is until the last byte
	// could. Neither includes the end of the stream.
	TTFB, Total time.Duration
	// Messages counts the ext_proc messages sent.
	Messages int
	// Delivered counts the response body bytes the client received.
	Delivered int
	// BodyMutated and HeadersMutated tell whether a reply carried a body
	// mutation, or a header mutation (set or remove).
	BodyMutated, HeadersMutated bool
	// Immediate is the immediate response that ended the exchange, if any.
	Immediate *extprocv3.ImmediateResponse
	// RequestBody and ResponseBody are the bodies after the server's
	// mutations; set only when [Driver.Record] is on.
	RequestBody, ResponseBody []byte
}

// Driver plays Envoy's ext_proc filter leanly (see the package doc).
type Driver struct {
	// Mode is the filter's processing_mode; nil means Envoy's default
	// (headers SEND, bodies NONE, trailers SKIP), as in envoy/envoy.yaml.
	// mode_override is always allowed (allow_mode_override: true).
	Mode *filterv3.ProcessingMode
	// Record keeps the bodies in the Outcome (for tests; costs copies).
	Record bool
}

// Prepared is an Exchange turned into the ext_proc messages that carry it,
// built once and sent by every [Driver.Do]. It is read-only and may be used
// by many goroutines at once. Each message is encoded once, at its first
// send, and the same bytes go to every target: Envoy's encoding is not what
// the bench measures, and a constant message costs every target the same
// (none). A message changed after Prepare must be changed before the first
// Do.
type Prepared struct {
	x            *Exchange
	reqHeaders   *extprocv3.ProcessingRequest
	reqBody      *extprocv3.ProcessingRequest
	respHeaders  *extprocv3.ProcessingRequest
	respChunks   []*extprocv3.ProcessingRequest // STREAMED
	respBuffered *extprocv3.ProcessingRequest   // BUFFERED: the whole body
	respLen      int
	wire         map[*extprocv3.ProcessingRequest]*encoded
}

// forwardMetadata puts md on every message of p, as Envoy's ext_proc
// filter sends the forwarded namespaces with each message. Call it before
// p's first Do.
func (p *Prepared) forwardMetadata(md *corev3.Metadata) {
	for _, m := range append([]*extprocv3.ProcessingRequest{p.reqHeaders, p.reqBody, p.respHeaders, p.respBuffered}, p.respChunks...) {
		if m != nil {
			m.MetadataContext = md
		}
	}
}

// encoded is one message's wire form, made at its first send.
type encoded struct {
	once sync.Once
	msg  grpc.PreparedMsg
	err  error
}

// Prepare builds the messages of x.
func Prepare(x *Exchange) *Prepared {
	p := &Prepared{x: x}
	p.reqHeaders = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: headerMap(x.RequestHeaders), EndOfStream: x.RequestBody == nil}}}
	if x.RequestBody != nil {
		p.reqBody = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: x.RequestBody, EndOfStream: true}}}
	}
	p.respHeaders = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: headerMap(x.ResponseHeaders), EndOfStream: x.ResponseBody == nil}}}
	var whole []byte
	for i, c := range x.ResponseBody {
		p.respChunks = append(p.respChunks, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: c, EndOfStream: i == len(x.ResponseBody)-1}}})
		whole = append(whole, c...)
	}
	p.respLen = len(whole)
	if x.ResponseBody != nil {
		p.respBuffered = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: whole, EndOfStream: true}}}
	}
	p.wire = map[*extprocv3.ProcessingRequest]*encoded{}
	for _, m := range append([]*extprocv3.ProcessingRequest{p.reqHeaders, p.reqBody, p.respHeaders, p.respBuffered}, p.respChunks...) {
		if m != nil {
			p.wire[m] = &encoded{}
		}
	}
	return p
}

// send sends m of p on cs, encoded once for all gRPC streams. The
// in-memory Pipe, which has no wire, gets the message itself.
func (p *Prepared) send(cs extprocv3.ExternalProcessor_ProcessClient, m *extprocv3.ProcessingRequest) error {
	e := p.wire[m]
	if _, pipe := cs.(*pipeClientStream); pipe || e == nil {
		return cs.Send(m)
	}
	e.once.Do(func() { e.err = e.msg.Encode(cs, m) })
	if e.err != nil {
		return fmt.Errorf("encode %s: %w", kindOf(m), e.err)
	}
	return cs.SendMsg(&e.msg)
}

// ResponseLen is the length of the response body.
func (p *Prepared) ResponseLen() int { return p.respLen }

func headerMap(hs []Header) *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for _, h := range hs {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: h.Key, RawValue: []byte(h.Value)})
	}
	return m
}

// modes is the effective processing mode of one exchange.
type modes struct {
	respHeaders bool
	reqBody     filterv3.ProcessingMode_BodySendMode
	respBody    filterv3.ProcessingMode_BodySendMode
}

func (d *Driver) configured() modes {
	m := modes{respHeaders: d.Mode.GetResponseHeaderMode() != filterv3.ProcessingMode_SKIP}
	m.reqBody, m.respBody = d.Mode.GetRequestBodyMode(), d.Mode.GetResponseBodyMode()
	return m
}

// override applies a mode_override as Envoy does: DEFAULT header modes keep
// the current ones, both body modes are taken literally.
func (m *modes) override(o *filterv3.ProcessingMode) {
	if o == nil {
		return
	}
	switch o.GetResponseHeaderMode() {
	case filterv3.ProcessingMode_SEND:
		m.respHeaders = true
	case filterv3.ProcessingMode_SKIP:
		m.respHeaders = false
	}
	m.reqBody, m.respBody = o.GetRequestBodyMode(), o.GetResponseBodyMode()
}

// stream is one Process stream of one exchange.
type stream struct {
	cs  extprocv3.ExternalProcessor_ProcessClient
	p   *Prepared
	out *Outcome
}

// call sends m and returns its reply, checking the oneof. An immediate
// response is returned as is.
func (s *stream) call(m *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	s.out.Messages++
	if err := s.p.send(s.cs, m); err != nil {
		return nil, fmt.Errorf("send %s: %w", kindOf(m), err)
	}
	r, err := s.cs.Recv()
	if err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("%w: stream ended before the reply to %s", ErrProtocol, kindOf(m))
		}
		return nil, fmt.Errorf("reply to %s: %w", kindOf(m), err)
	}
	if ir := r.GetImmediateResponse(); ir != nil {
		s.out.Immediate = ir
		return r, nil
	}
	if !matches(m, r) {
		return nil, fmt.Errorf("%w: reply %T to %s", ErrProtocol, r.GetResponse(), kindOf(m))
	}
	return r, nil
}

// Do runs one exchange over a new Process stream of c.
func (d *Driver) Do(ctx context.Context, c extprocv3.ExternalProcessorClient, p *Prepared) (Outcome, error) {
	var out Outcome
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // frees the stream whatever happened
	start := time.Now()
	cs, err := c.Process(ctx)
	if err != nil {
		return out, fmt.Errorf("open stream: %w", err)
	}
	s := &stream{cs: cs, p: p, out: &out}
	done, err := d.exchange(s, p, start)
	if err != nil || done {
		return out, err
	}
	// Envoy (1.37, by default) half-closes once it needs nothing more and
	// resets the stream at once (the deferred cancel): the server sees io.EOF
	// and/or Canceled, and a late reply is dropped.
	if err := cs.CloseSend(); err != nil {
		return out, fmt.Errorf("close send: %w", err)
	}
	return out, nil
}

// exchange plays the messages; done reports an immediate response.
func (d *Driver) exchange(s *stream, p *Prepared, start time.Time) (done bool, err error) {
	out := s.out
	m := d.configured()
	finish := func(immediate bool, err error) (bool, error) {
		if err != nil || !immediate {
			return false, err
		}
		out.Total = time.Since(start)
		if out.TTFB == 0 {
			out.TTFB = out.Total
		}
		return true, nil
	}
	r, err := s.call(p.reqHeaders)
	if err != nil || out.Immediate != nil {
		return finish(out.Immediate != nil, err)
	}
	s.noteMutation(r)
	m.override(r.GetModeOverride())
	if p.reqBody != nil {
		if immediate, err := d.requestBody(s, p, &m); err != nil || immediate {
			return finish(immediate, err)
		}
	}
	if m.respHeaders {
		r, err := s.call(p.respHeaders)
		if err != nil || out.Immediate != nil {
			return finish(out.Immediate != nil, err)
		}
		s.noteMutation(r)
		m.override(r.GetModeOverride())
	}
	if p.x.ResponseBody == nil {
		out.TTFB = time.Since(start)
		out.Total = out.TTFB
		return false, nil
	}
	if immediate, err := d.responseBody(s, p, &m, start); err != nil || immediate {
		return finish(immediate, err)
	}
	out.Total = time.Since(start)
	return false, nil
}

// requestBody sends the request body as mode m asks; immediate reports an
// immediate response.
func (d *Driver) requestBody(s *stream, p *Prepared, m *modes) (immediate bool, err error) {
	body := p.x.RequestBody
	switch m.reqBody {
	case filterv3.ProcessingMode_NONE:
	case filterv3.ProcessingMode_BUFFERED:
		r, err := s.call(p.reqBody)
		if err != nil || s.out.Immediate != nil {
			return s.out.Immediate != nil, err
		}
		body = s.apply(r, body)
	default:
		return false, fmt.Errorf("%w: request body mode %s", ErrUnsupported, m.reqBody)
	}
	if d.Record {
		s.out.RequestBody = append([]byte(nil), body...)
	}
	return false, nil
}

// responseBody sends the response body as mode m asks and delivers what
// the client receives; immediate reports an immediate response (possible
// in BUFFERED mode only: the headers are still held).
func (d *Driver) responseBody(s *stream, p *Prepared, m *modes, start time.Time) (immediate bool, err error) {
	out := s.out
	deliver := func(b []byte) {
		if len(b) == 0 {
			return
		}
		if out.Delivered == 0 {
			out.TTFB = time.Since(start)
		}
		out.Delivered += len(b)
		if d.Record {
			out.ResponseBody = append(out.ResponseBody, b...)
		}
	}
	switch m.respBody {
	case filterv3.ProcessingMode_NONE:
		for _, c := range p.x.ResponseBody {
			deliver(c)
		}
	case filterv3.ProcessingMode_BUFFERED:
		r, err := s.call(p.respBuffered)
		if err != nil || out.Immediate != nil {
			return out.Immediate != nil, err
		}
		deliver(s.apply(r, p.respBuffered.GetResponseBody().GetBody()))
	case filterv3.ProcessingMode_STREAMED:
		for i, msg := range p.respChunks {
			r, err := s.call(msg)
			if err != nil {
				return false, err
			}
			if out.Immediate != nil {
				return false, fmt.Errorf("%w: immediate response after response headers went out", ErrProtocol)
			}
			deliver(s.apply(r, p.x.ResponseBody[i]))
		}
	default:
		return false, fmt.Errorf("%w: response body mode %s", ErrUnsupported, m.respBody)
	}
	return false, nil
}

// apply returns cur after the body mutation of r, if any.
func (s *stream) apply(r *extprocv3.ProcessingResponse, cur []byte) []byte {
	s.noteMutation(r)
	bm := envoytest.CommonOf(r).GetBodyMutation()
	switch {
	case bm == nil:
		return cur
	case bm.GetClearBody():
		return nil
	default:
		return bm.GetBody()
	}
}

// noteMutation records in the Outcome whether r mutates headers or body.
func (s *stream) noteMutation(r *extprocv3.ProcessingResponse) {
	cr := envoytest.CommonOf(r)
	if cr.GetBodyMutation() != nil {
		s.out.BodyMutated = true
	}
	if hm := cr.GetHeaderMutation(); len(hm.GetSetHeaders()) > 0 || len(hm.GetRemoveHeaders()) > 0 {
		s.out.HeadersMutated = true
	}
}

// matches reports whether reply r has the oneof that answers m.
func matches(m *extprocv3.ProcessingRequest, r *extprocv3.ProcessingResponse) bool {
	switch m.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return r.GetRequestHeaders() != nil
	case *extprocv3.ProcessingRequest_RequestBody:
		return r.GetRequestBody() != nil
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return r.GetResponseHeaders() != nil
	case *extprocv3.ProcessingRequest_ResponseBody:
		return r.GetResponseBody() != nil
	}
	return false
}

func kindOf(m *extprocv3.ProcessingRequest) string {
	switch m.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return "request_headers"
	case *extprocv3.ProcessingRequest_RequestBody:
		return "request_body"
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return "response_headers"
	case *extprocv3.ProcessingRequest_ResponseBody:
		return "response_body"
	}
	return fmt.Sprintf("%T", m.GetRequest())
}
