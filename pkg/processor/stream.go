package processor

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// One ext_proc stream is one HTTP request. Its messages are answered by
// the phase the stream is in, and a phase only moves forward:
//
//	request headers ─┬─▶ passThrough (nothing to read: every message as is)
//	  (plan.go)      ├─▶ awaitingBody ─▶ awaitingAnswer ─┬─▶ passThrough
//	                 │     (request.go)    (answer.go)    ├─▶ *jsonAnswer (answer.go)
//	                 └─▶ awaitingAnswer (a GET replay)    └─▶ *sseAnswer ─┬─▶ passThrough (over the limit, fail open)
//	                                                        (sse.go)     └─▶ droppedAnswer (over the limit, fail closed)
//
// Each phase is a type; handle dispatches on it.
type phase interface{ isPhase() }

type (
	// passThrough answers every message as is.
	passThrough struct{}
	// awaitingBody: the request body was asked for and not yet seen.
	awaitingBody struct{}
	// awaitingAnswer: the request was read (or needs no reading); the
	// response headers choose how the answer is read.
	awaitingAnswer struct{}
	// droppedAnswer: a streamed answer failed closed; the rest of it is
	// dropped.
	droppedAnswer struct{}
)

func (passThrough) isPhase()    {}
func (awaitingBody) isPhase()   {}
func (awaitingAnswer) isPhase() {}
func (droppedAnswer) isPhase()  {}
func (*jsonAnswer) isPhase()    {}
func (*sseAnswer) isPhase()     {}

// stream answers the messages of one ext_proc stream.
type stream struct {
	x     exchange
	phase phase
	// json and sse are the answer phases, kept here so that entering one
	// costs no allocation.
	json jsonAnswer
	sse  sseAnswer
	// refused, when set, answers every message: the filter is misconfigured.
	refused *extprocv3.ProcessingResponse
}

// newStream returns the stream of one request, run with snap and facts,
// what snap's Hooks answer (factsCache.of).
func newStream(ctx context.Context, snap *Snapshot, facts *hookFacts, opts *Options, c *canned, accepted *attribution.Accepted) *stream {
	st := &stream{phase: passThrough{}, x: exchange{ctx: ctx, snap: snap, hooked: facts, log: opts.Logger, obs: opts.Observer, canned: c,
		hookCtx: hookContext{withHeaders: opts.WithHeaders}}}
	x := &st.x
	if opts.LogBodies && opts.Logger.GetLevel() <= zerolog.DebugLevel {
		x.req.logHeaders = make([]string, 0, 32)
	}
	x.results = results{x: x, store: opts.Attribution, accepted: accepted}
	x.http.x = x
	x.trail = trail{x: x, auditor: opts.Audit, tracer: opts.Tracer, recording: opts.Audit != nil || opts.Tracer != nil}
	return st
}

// handle answers one message with exactly one reply of the matching kind.
func (st *stream) handle(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	x := &st.x
	var kind string
	var resp *extprocv3.ProcessingResponse
	switch r := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		kind = "request_headers"
		resp, st.phase = x.requestHeaders(req)
	case *extprocv3.ProcessingRequest_RequestBody:
		kind = "request_body"
		resp = x.canned.requestBodyAsIs
		if _, ok := st.phase.(awaitingBody); ok {
			st.phase = awaitingAnswer{}
			resp = x.requestBody(r.RequestBody.GetBody())
		}
	case *extprocv3.ProcessingRequest_RequestTrailers:
		kind = "request_trailers"
		resp = x.canned.requestTrailers
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		kind = "response_headers"
		resp = st.responseHeaders(r.ResponseHeaders)
	case *extprocv3.ProcessingRequest_ResponseBody:
		kind = "response_body"
		resp = st.responseBody(r.ResponseBody)
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		kind = "response_trailers"
		resp = x.canned.responseTrailers
		if s, ok := st.phase.(*sseAnswer); ok {
			resp, st.phase = s.trailers()
		}
	default:
		// An unknown message kind (a newer Envoy): there is no reply kind to
		// match, so refuse the request rather than guess.
		x.logger().Error().Str("type", fmt.Sprintf("%T", req.Request)).Msg("unknown ext_proc message")
		return x.internalError("unsupported ext_proc message")
	}
	x.obs.Message(kind)
	return x.decision.attach(resp) // replies.go
}

// responseHeaders answers the response headers: http_post_request, then
// how the answer is read (answer.go).
func (st *stream) responseHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	x := &st.x
	if _, ok := st.phase.(awaitingBody); ok {
		// We asked for the request body and never got it: Envoy ignored our
		// mode_override, so no pre hook ran. Never pass that silently.
		st.phase = passThrough{}
		x.obs.Immediate("internal")
		x.logger().Error().Msg("request body was never sent: set allow_mode_override: true on the ext_proc filter")
		return jsonRPCReply(http.StatusInternalServerError, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInternalError,
			"mcp-extproc misconfigured: Envoy did not send the request body (allow_mode_override must be true)", nil), false, nil)
	}
	var sets map[string]string
	if x.http.req != nil { // a plugin has http_post_request (httphooks.go)
		var refused *extprocv3.ProcessingResponse
		if sets, refused = x.http.postRequest(h); refused != nil {
			st.phase = passThrough{}
			return refused
		}
	}
	resp, next := st.readAnswer(h)
	st.phase = next
	if sets != nil {
		resp = withSetHeaders(resp, (*extprocv3.ProcessingResponse).GetResponseHeaders, sets)
	}
	return resp
}

// responseBody answers a response body message by the answer's phase.
func (st *stream) responseBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	switch p := st.phase.(type) {
	case *jsonAnswer:
		return p.body(b.GetBody())
	case *sseAnswer:
		resp, next := p.chunk(b.GetBody(), b.GetEndOfStream())
		st.phase = next
		return resp
	case droppedAnswer:
		return bodyReply(true, []byte{}, false)
	}
	return st.x.canned.responseBodyAsIs
}

// exchange is what the phases of one stream share: the configuration, the
// request as its headers described it, the caller, the plugin contexts, the
// matching of results to requests and the decision.
type exchange struct {
	ctx    context.Context
	snap   *Snapshot
	hooked *hookFacts // what snap.Hooks answers (server.go)
	canned *canned
	log    zerolog.Logger
	obs    Observer
	// req is what the request headers said (plan.go).
	req requestFacts
	// caller is who is calling (caller.go).
	caller callerState
	// http runs the HTTP-level hooks (httphooks.go).
	http httpHooks
	// hookCtx is what the exchange's plugin calls share.
	hookCtx hookContext
	// results matches answers to their requests (results.go).
	results results
	// decision is what was decided, for Envoy's dynamic metadata.
	decision decision
	// trail is the audit events and the span (trail.go).
	trail trail
	// body lends the buffer an edited list result is built in
	// (replies.go).
	body bodyLender
	// ruleHeaders is the request's headers as the rules read them
	// (rules.go).
	ruleHeaders ruleHeaderCache
}

// hookContext is what the plugin calls of one exchange share.
type hookContext struct {
	// msg is the plugin context the hooks of the message being inspected
	// share (permission, pre hook, delegate, then its post hook and, for a
	// body of one message, http_post_request); nil until one of them runs.
	msg *executor.RequestContext
	// withHeaders attaches HTTP headers to the plugin calls made with ctx.
	withHeaders func(context.Context, http.Header) context.Context
	ready       bool // ensureContext ran
	logged      bool // the exchange's logger carries the request's fields
	// bound is the context the hooks run under, once ensureContext ran.
	bound boundContext
}

// boundContext is a context whose Done channel and deadline were read
// once. Every hook the exchange runs reads both (its deadline is the
// earlier of its own and the context's), and the stream's context answers
// them by walking gRPC's chain of stream contexts each time, a few
// hundred nanoseconds in a sidecar that just handled a message. Err and
// Value are the context's own.
type boundContext struct {
	context.Context
	done     <-chan struct{}
	deadline time.Time
	bounded  bool
}

// bind reads ctx's Done channel and deadline.
func (c *boundContext) bind(ctx context.Context) {
	c.Context, c.done = ctx, ctx.Done()
	c.deadline, c.bounded = ctx.Deadline()
}

// Done implements context.Context.
func (c *boundContext) Done() <-chan struct{} { return c.done }

// Deadline implements context.Context.
func (c *boundContext) Deadline() (time.Time, bool) { return c.deadline, c.bounded }

// ensureContext fills in what only a plugin call or a log line needs: the
// request id (generated when the request has none or an oversized one),
// and, unless every plugin runs in process, the plugin context metadata
// and the headers that follow the call into plugins (trace context
// validated and in canonical form, x-request-id); the
// logger's fields follow on the first log line (logger). A request no
// plugin applies to never pays for it.
func (x *exchange) ensureContext() {
	if x.hookCtx.ready {
		return
	}
	x.hookCtx.ready = true
	r := &x.req
	if id := headerBytes(r.raw.requestID); len(id) > MaxRequestIDBytes {
		r.dropHeader("x-request-id", len(id))
	} else if r.requestID == "" {
		r.requestID = string(id)
	}
	if r.requestID == "" {
		r.requestID = rand.Text()
	}
	g := &r.global
	g.RequestID = r.requestID
	if !x.snap.InProcessOnly {
		// The global context's metadata is for plugins out of process
		// (the built-ins read none of it): a map of boxed strings costs
		// more than each built-in's own work on a small call.
		g.Metadata = map[string]any{"path": r.path, "authority": r.authority}
		if r.sessionID != "" {
			g.Metadata["mcp_session_id"] = r.sessionID
		}
		h := r.traceContext()
		for k := range h {
			g.Metadata[strings.ToLower(k)] = h.Get(k)
		}
		if x.hookCtx.withHeaders != nil {
			if h == nil {
				h = make(http.Header, 1)
			}
			h["X-Request-Id"] = []string{r.requestID} // canonical already: no Set, which would canonicalize it again
			x.ctx = x.hookCtx.withHeaders(x.ctx, h)
		}
	}
	if x.trail.recording {
		x.trail.begin() // the span continues the request's trace
	}
	// The context is final: the hooks run under it from here on.
	x.hookCtx.bound.bind(x.ctx)
	x.ctx = &x.hookCtx.bound
	if len(r.droppedHeaders) > 0 {
		r.logDropped(x.logger())
	}
}

// logger returns the stream's logger with the request fields set, made on
// first use: a request whose plugins all allow it logs nothing, and then
// pays for no logger of its own.
func (x *exchange) logger() *zerolog.Logger {
	x.ensureContext()
	if !x.hookCtx.logged {
		x.hookCtx.logged = true
		x.log = x.log.With().Str("request_id", x.req.requestID).Str("mcp_session_id", logsafe.Cap(x.req.sessionID, logsafe.DefaultCap)).Logger()
	}
	return &x.log
}

// requestContext returns the plugin context of the current message's
// hooks, made at the first of them: a copy of the HTTP hooks' context when
// they ran (so each message of a batch starts from it, never from another
// message's), else a fresh one. The message's later hooks get the same
// context, so what a plugin keeps in http_auth_check_permission reaches
// its pre hook, token_delegate and its post hook.
func (x *exchange) requestContext() *executor.RequestContext {
	if x.hookCtx.msg == nil {
		if x.http.context != nil {
			x.hookCtx.msg = x.http.context.Clone()
		} else {
			x.hookCtx.msg = executor.NewRequestContext(x.req.global)
		}
	}
	return x.hookCtx.msg
}

// runHook runs hook through the plugin chain and records each plugin's
// verdict and latency on audit event ev (-1: none).
func (x *exchange) runHook(ev int, hook cpex.HookType, payload json.RawMessage, rc *executor.RequestContext, t hookfamily.Target) executor.Outcome {
	if ev < 0 || rc == nil {
		return x.snap.Hooks.Run(x.ctx, hook, payload, rc, t)
	}
	rc.OnInvoke = x.trail.invoked(ev)
	out := x.snap.Hooks.Run(x.ctx, hook, payload, rc, t)
	rc.OnInvoke = nil
	return out
}

// shadow reports whether extproc.shadow lets everything through.
func (x *exchange) shadow() bool { return x.snap.Settings.Shadow }

func (x *exchange) internalError(reason string) *extprocv3.ProcessingResponse {
	x.obs.Immediate("internal")
	return jsonRPCReply(http.StatusInternalServerError, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInternalError, reason, nil), false, nil)
}

// What a client sends in request headers reaches plugin calls: the trace
// headers and x-request-id as HTTP headers of every invoke_hook request, the
// forwarded headers inside the tool_pre_invoke payload. A plugin's HTTP
// server refuses headers it finds too large (Node: 16 KiB for all of them),
// and a refusal must never come from what one client chose to send. So each
// value is bounded here, before any plugin call is built; what exceeds its
// bound is not forwarded at all (a cut value would be a different value).
const (
	// MaxRequestIDBytes bounds x-request-id. Longer: the request gets a
	// generated id instead, for the plugins and the logs.
	MaxRequestIDBytes = 128
	// MaxForwardedHeaderBytes bounds the value of a header listed in
	// extproc.forward_headers (and of the user, tenant and server headers).
	// Longer: the header is left out of the plugin payload.
	MaxForwardedHeaderBytes = 4096
	// MaxTracestateBytes and MaxTracestateMembers are the W3C Trace Context
	// limits of tracestate. A tracestate beyond them, or malformed, is not
	// forwarded; traceparent is forwarded only when well formed, re-encoded
	// in its exact version-00 form (55 bytes).
	MaxTracestateBytes   = 512
	MaxTracestateMembers = 32
)

// rawHeaders are client header values as received, read only when a plugin
// call or a log line needs them.
type rawHeaders struct {
	requestID, traceparent, tracestate *corev3.HeaderValue
}

// dropped records a client header left out because of its size, for one
// debug line per stream.
type dropped struct {
	name  string
	bytes int
}

// dropHeader notes that header k of n bytes is not forwarded.
func (r *requestFacts) dropHeader(k string, n int) {
	r.droppedHeaders = append(r.droppedHeaders, dropped{name: logsafe.Cap(k, 64), bytes: n})
}

// logDropped logs, once per stream at debug, the headers left out.
func (r *requestFacts) logDropped(log *zerolog.Logger) {
	if len(r.droppedHeaders) == 0 || log.GetLevel() > zerolog.DebugLevel {
		return
	}
	arr := make([]string, 0, len(r.droppedHeaders))
	for _, d := range r.droppedHeaders {
		arr = append(arr, d.name)
	}
	log.Debug().Strs("headers", arr).Int("max_request_id_bytes", MaxRequestIDBytes).
		Int("max_forwarded_header_bytes", MaxForwardedHeaderBytes).Msg("oversized or malformed request headers not forwarded to plugins")
}

// boundedValue returns v when it fits in max bytes; else it records the
// header as dropped and returns ok false.
func (r *requestFacts) boundedValue(k, v string, max int) (string, bool) {
	if len(v) > max {
		r.dropHeader(k, len(v))
		return "", false
	}
	return v, true
}

// traceContext validates the request's W3C trace headers and returns them
// in canonical form for the plugin calls, or nil when traceparent is absent
// or malformed (a tracestate without a valid traceparent means nothing).
// Parsing is OpenTelemetry's (go.opentelemetry.io/otel/propagation):
// traceparent of version 00 exactly, later versions by their first four
// fields; tracestate by its member syntax and the 32-member limit, and here
// by its 512-byte limit.
func (r *requestFacts) traceContext() http.Header {
	parent, state := headerBytes(r.raw.traceparent), headerBytes(r.raw.tracestate)
	if len(parent) == 0 {
		if len(state) != 0 {
			r.dropHeader("tracestate", len(state))
		}
		return nil
	}
	in := make(http.Header, 2)
	in.Set("traceparent", string(parent))
	if len(state) > MaxTracestateBytes {
		r.dropHeader("tracestate", len(state))
	} else if len(state) != 0 {
		in.Set("tracestate", string(state))
	}
	var prop propagation.TraceContext
	sc := trace.SpanContextFromContext(prop.Extract(context.Background(), propagation.HeaderCarrier(in)))
	if !sc.IsValid() {
		r.dropHeader("traceparent", len(parent))
		return nil
	}
	if in.Get("tracestate") != "" && sc.TraceState().Len() == 0 {
		r.dropHeader("tracestate", len(state)) // malformed or over 32 members
	}
	out := make(http.Header, 3)
	prop.Inject(trace.ContextWithRemoteSpanContext(context.Background(), sc), propagation.HeaderCarrier(out))
	return out
}
