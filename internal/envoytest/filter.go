// Package envoytest is a strict fake of Envoy's External Processing HTTP filter
// (envoy.filters.http.ext_proc, API v3), for tests. No Envoy binary can run on
// the machines this project is tested on, so this package plays Envoy over real
// gRPC and fails where Envoy would fail (docs/extproc-contract.md §9).
//
// [Filter.Do] simulates one HTTP exchange: it sends the ext_proc messages Envoy
// would send for the configured processing mode, applies the replies exactly as
// Envoy does, calls an [Upstream] function in place of the upstream cluster and
// reports what the downstream client received in a [Result]. [Proxy] puts the
// same state machine behind a real HTTP front, so a real MCP client can talk to
// a real MCP server through the processor under test.
//
// How a stream ends: once no more replies are due, the fake half-closes and
// resets the stream at once, as Envoy does by default (the server sees io.EOF
// and/or codes.Canceled); [Filter.GracefulClose] waits for the server
// instead. A reply after processing finished is dropped, never an error.
//
// FULL_DUPLEX_STREAMED is modelled simply: a direction's chunks and trailers
// are all sent before its replies are read.
//
// What the fake does not model: the GRPC body mode and a mode_override to
// FULL_DUPLEX_STREAMED ([ErrUnsupported]), send_body_without_waiting_for_header_response,
// response attributes, typed metadata, per-route overrides, and the
// interleaving of request and response directions (the request is processed
// completely before the upstream is called). Body chunks are sent one at a
// time: the next chunk goes out once the previous reply arrived.
package envoytest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// Defaults of the filter configuration, as in Envoy.
const (
	// DefaultMessageTimeout is Envoy's default message_timeout.
	DefaultMessageTimeout = 200 * time.Millisecond
	// DefaultBufferLimit is Envoy's default per_connection_buffer_limit_bytes.
	DefaultBufferLimit = 1 << 20
	// DefaultDeferredCloseTimeout is Envoy's default deferred_close_timeout:
	// how long an observability-mode stream stays half-closed.
	DefaultDeferredCloseTimeout = 5 * time.Second
	// GracefulCloseWait is how long Envoy waits for the server after a
	// half-close when graceful close is enabled.
	GracefulCloseWait = time.Second
)

// Values of [Result.LocalError]: why the fake (as Envoy) ended or reset the
// exchange itself. Result.Details carries the specifics.
const (
	// LocalSpurious: a reply with the wrong oneof, a reply nobody asked for
	// while processing goes on, a reply without any response, or a body
	// mutation of the wrong kind for the body mode (streamed_response outside
	// FULL_DUPLEX_STREAMED, a plain body in it). Status 500 unless
	// FailureModeAllow. Replies after processing finished are not spurious:
	// they are dropped (see Result.Ignored).
	LocalSpurious = "spurious message"
	// LocalTimeout: no reply within the message timeout. Status 504 unless
	// FailureModeAllow.
	LocalTimeout = "per-message timeout"
	// LocalGRPCError: the Process stream failed with a gRPC error. Status 500
	// unless FailureModeAllow.
	LocalGRPCError = "gRPC error"
	// LocalInvalidMutation: a header mutation Envoy rejects (value and
	// raw_value both set, invalid characters, with DisallowIsError anything
	// the mutation rules refuse: changing host, :authority, :method, :scheme
	// or any header starting with "x-envoy", removing a ":" header or host,
	// appending to a ":" header, a :status below 200), or a HeaderValue with
	// only `value` set, which Envoy
	// would silently turn into an empty value and this fake fails on purpose.
	// Status 500 whatever FailureModeAllow says.
	LocalInvalidMutation = "invalid header mutation"
	// LocalContentLengthMismatch: BUFFERED body with headers SEND, the body was
	// mutated and content-length (after the same reply's header mutations)
	// differs from the new length. Envoy's own message. Status 500.
	LocalContentLengthMismatch = "mismatch between content length and the length of the mutated body"
	// LocalStreamedContentLength: the response kept a content-length that does
	// not match the bytes the client received, typically because it was
	// switched to STREAMED by mode_override and the processor neither removed
	// content-length nor kept chunk sizes. The client would see a broken
	// response, so the result is a reset.
	LocalStreamedContentLength = "content-length mismatch in streamed response"
	// LocalStreamedRequestContentLength is the request-side twin of
	// LocalStreamedContentLength: the upstream would receive a request whose
	// content-length lies. Status 500 and the upstream is not called.
	LocalStreamedRequestContentLength = "content-length mismatch in streamed request"
	// LocalBufferLimit: a BUFFERED body over BufferLimit: 413 for a request,
	// 500 for a response.
	LocalBufferLimit = "buffer limit exceeded"
	// LocalResetAfterHeaders: an ImmediateResponse arrived after the response
	// headers had gone downstream; Envoy can only reset the stream.
	LocalResetAfterHeaders = "reset after headers sent"
	// LocalUpstreamReset: the upstream response body failed mid-way.
	LocalUpstreamReset = "upstream reset"
)

// ErrUnsupported is returned (wrapped) by [Filter.Do] for a configuration or a
// mode_override this fake does not model (GRPC body mode, an override to
// FULL_DUPLEX_STREAMED).
var ErrUnsupported = errors.New("envoytest: not supported by the fake")

// ErrInvalid is returned (wrapped) by [Filter.Do] for unusable arguments.
var ErrInvalid = errors.New("envoytest: invalid argument")

// Filter is the ext_proc filter's configuration. The zero value of every field
// except Client (or Clients) means Envoy's default.
type Filter struct {
	// Client reaches the ExternalProcessor under test (see [Serve]).
	Client extprocv3.ExternalProcessorClient
	// Clients, if not empty, replace Client: several ExternalProcessor
	// servers behind one ext_proc cluster (the gateway shape, one Deployment
	// with several replicas). Each exchange's stream goes to one of them
	// picked at random, as Envoy balances per gRPC stream; Result.Server
	// says which. The rules the fake enforces are the same for all.
	Clients []extprocv3.ExternalProcessorClient
	// Mode is processing_mode. Nil means request headers SEND, response
	// headers SEND, bodies NONE, trailers SKIP. DEFAULT header modes mean
	// SEND, DEFAULT trailer modes SKIP.
	Mode *filterv3.ProcessingMode
	// AllowModeOverride is allow_mode_override: honour mode_override in a
	// headers reply.
	AllowModeOverride bool
	// MessageTimeout is message_timeout (default 200ms), per message.
	MessageTimeout time.Duration
	// MaxMessageTimeout is max_message_timeout. When zero, a reply carrying
	// override_message_timeout is ignored, as in Envoy.
	MaxMessageTimeout time.Duration
	// FailureModeAllow is failure_mode_allow: timeouts, gRPC errors and
	// spurious messages let the exchange continue unprocessed.
	FailureModeAllow bool
	// BufferLimit is the stream buffer limit (default 1 MiB) for BUFFERED and
	// BUFFERED_PARTIAL bodies.
	BufferLimit int
	// DisallowIsError is mutation_rules.disallow_is_error. With Envoy's
	// default rules (false), changes to host, :authority, :method, :scheme
	// and headers starting with "x-envoy", removals of ":" headers and host,
	// appends to ":" headers and a :status below 200 are silently ignored and
	// listed in Result.RejectedMutations; with true they fail the exchange
	// (500). An ImmediateResponse's refused headers are skipped either way.
	DisallowIsError bool
	// GracefulClose is Envoy's opt-in graceful close: after the last reply
	// the fake half-closes and waits up to GracefulCloseWait for the server
	// to end the stream, instead of resetting it at once. Replies in that
	// window are dropped and listed in Result.Ignored.
	GracefulClose bool
	// ObservabilityMode is observability_mode: the fake sends every message
	// without waiting for a reply and applies none. At the end it half-closes
	// and waits up to DeferredCloseTimeout for the server to end the stream;
	// any reply is dropped and listed in Result.Ignored, so a test can tell
	// that the server answered where Envoy expects silence.
	ObservabilityMode bool
	// DeferredCloseTimeout is deferred_close_timeout (default 5s).
	DeferredCloseTimeout time.Duration
	// Forwarding is what the filter forwards beside the HTTP messages:
	// metadata_options and request_attributes (envoycontext.go).
	Forwarding Forwarding
}

// Request is what the downstream client sends.
type Request struct {
	// Method defaults to GET, Path to "/", Scheme to "http", Authority to the
	// Host header or "localhost".
	Method, Path, Authority, Scheme string
	// Headers are sent lower-cased, sorted by name; Host is folded into
	// :authority. The fake adds nothing (no x-request-id, no
	// x-forwarded-proto) and does not invent content-length.
	Headers http.Header
	// Body holds the chunks as they arrive from downstream. No chunks means
	// no body (end_of_stream on the headers message).
	Body [][]byte
	// Trailers are the request trailers, if any.
	Trailers http.Header
	// Info is what Envoy knows of the request besides its headers: the
	// dynamic metadata earlier filters set and the connection's attributes
	// (envoycontext.go). The filter forwards only what Forwarding asks for.
	Info StreamInfo

	// OnResponseHeaders, when set, is called when the response headers
	// reach the client.
	OnResponseHeaders func(status int, h http.Header)
	// OnResponseChunk, when set, is called with each non-empty response
	// body chunk as it reaches the client, before the next upstream chunk is
	// read. Tests use it to prove streaming order.
	OnResponseChunk func(chunk []byte)
}

// UpstreamRequest is what reached the upstream: the request after every
// mutation Envoy applied.
type UpstreamRequest struct {
	Method, Path, Authority, Scheme string
	Headers                         http.Header
	Body                            []byte
	Trailers                        http.Header
}

// UpstreamResponse is what the upstream answers. At most one of Body, Stream
// and Reader is used, in that order of precedence; none means no body.
type UpstreamResponse struct {
	Status  int
	Headers http.Header
	// Body holds chunks known in advance; the last one carries end_of_stream.
	Body [][]byte
	// Stream delivers chunks over time; closing it ends the body (Envoy then
	// sends an empty end_of_stream chunk, as for HTTP/1 chunked encoding).
	Stream <-chan []byte
	// Reader delivers chunks over time, one per Read; it is closed when it
	// is an io.Closer. An upstream error while reading resets the exchange.
	Reader io.Reader
	// Trailers are read after the body ended (so the map of an
	// http.Response works).
	Trailers http.Header
}

// Upstream plays the upstream cluster (the MCP server).
type Upstream func(ctx context.Context, req *UpstreamRequest) (*UpstreamResponse, error)

// Result is what happened to one exchange.
type Result struct {
	// Status, Headers, Body and Trailers are what the downstream client
	// received (framing headers such as content-length appear only when
	// Envoy would keep or set them).
	Status   int
	Headers  http.Header
	Body     []byte
	Trailers http.Header
	// Chunks are the non-empty body chunks in the order the client got them.
	Chunks [][]byte
	// UpstreamRequest is what reached the upstream; nil if it was never called.
	UpstreamRequest *UpstreamRequest
	// UpstreamErr is the error the Upstream returned, if any (the client
	// then gets Envoy's 503).
	UpstreamErr error

	// Immediate is set when an ImmediateResponse ended the exchange;
	// ImmediateDetails is its details field.
	Immediate        bool
	ImmediateDetails string
	// LocalError is one of the Local* constants when the fake, as Envoy,
	// answered or reset the exchange itself; Details says more.
	LocalError string
	Details    string
	// Reset is set when the downstream stream was reset after its headers
	// went out (the client sees a truncated response).
	Reset bool
	// FailedOpen is set when FailureModeAllow let the exchange continue
	// without the processor after an error.
	FailedOpen bool

	// Server is the index in Filter.Clients of the server the stream went
	// to (0 with Filter.Client).
	Server int
	// StreamOpened tells whether a Process stream was opened (lazily, on
	// the first message). StreamErr is how the server ended it: nil for a
	// clean end (io.EOF) or when the fake cancelled it.
	StreamOpened bool
	StreamErr    error
	// Sent and Received are the ext_proc messages in the order they crossed
	// the wire.
	Sent     []*extprocv3.ProcessingRequest
	Received []*extprocv3.ProcessingResponse
	// Ignored lists the replies Envoy drops silently: every reply in
	// observability mode, and replies after processing finished that the
	// fake saw (it sees them only while it waits after a half-close).
	Ignored []*extprocv3.ProcessingResponse
	// RejectedMutations lists header mutations Envoy ignores under its
	// mutation rules ("set x-envoy-foo", "remove :path").
	RejectedMutations []string
	// DynamicMetadata is the dynamic metadata the server wrote and Envoy
	// kept, by namespace, merged over the exchange (envoycontext.go): what
	// later filters and the access log read. DroppedMetadata lists the
	// namespaces it wrote that Envoy dropped (not receiving, not a Struct).
	DynamicMetadata map[string]*structpb.Struct
	DroppedMetadata []string
	// Notes lists what a careful reader of Envoy's logs would see: ignored
	// mutations, dropped content-length, a server that did not end the stream.
	Notes []string
}

func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Do runs one HTTP exchange through the filter: req from downstream, up in
// place of the upstream cluster. It returns an error only when the exchange
// cannot be simulated (bad arguments, [ErrUnsupported], ctx done), with the
// partial Result when the exchange had started; everything Envoy would do,
// including local replies and resets, is in the Result.
func (f *Filter) Do(ctx context.Context, req *Request, up Upstream) (*Result, error) {
	if req == nil || up == nil {
		return nil, fmt.Errorf("do: %w: nil request or upstream", ErrInvalid)
	}
	dreq := &downstreamRequest{
		method:    req.Method,
		path:      req.Path,
		authority: req.Authority,
		scheme:    req.Scheme,
		headers:   headersFromHTTP(req.Headers),
		body:      &sliceSource{chunks: req.Body},
		hasBody:   len(req.Body) > 0,
		trailers:  func() headerList { return headersFromHTTP(req.Trailers) },
		info:      &req.Info,
	}
	if dreq.authority == "" {
		dreq.authority = req.Headers.Get("Host")
	}
	return f.run(ctx, dreq, up, &recorder{req: req})
}

// recorder is the downstream of [Filter.Do]: the Result already holds what the
// client received, so it only calls the request's hooks.
type recorder struct{ req *Request }

func (r *recorder) writeHeader(status int, h http.Header) error {
	if r.req.OnResponseHeaders != nil {
		r.req.OnResponseHeaders(status, h.Clone())
	}
	return nil
}

func (r *recorder) write(p []byte) error {
	if r.req.OnResponseChunk != nil {
		r.req.OnResponseChunk(append([]byte(nil), p...))
	}
	return nil
}

func (r *recorder) writeTrailers(http.Header) error { return nil }

// pick returns the server of one exchange's stream and its index: Client,
// or one of Clients at random.
func (f *Filter) pick() (extprocv3.ExternalProcessorClient, int) {
	if len(f.Clients) == 0 {
		return f.Client, 0
	}
	i := rand.IntN(len(f.Clients))
	return f.Clients[i], i
}
