package processor

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/contentcoding"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
	"github.com/mcp-extproc/mcp-extproc/pkg/sse"
)

// responseMode is how the response body of a stream is read.
type responseMode int

const (
	respNone responseMode = iota
	respBuffered
	respStreamed
)

// stream is the state of one ext_proc stream, i.e. one HTTP request.
type stream struct {
	ctx    context.Context
	snap   *Snapshot
	canned *canned
	log    zerolog.Logger
	obs    Observer

	requestID    string
	sessionID    string
	path         string
	authority    string
	contextReady bool        // ensureContext ran
	encoding     string      // content-encoding of the request body, "" for identity
	trace        http.Header // traceparent, tracestate: sent with every plugin call
	// withHeaders attaches HTTP headers to the plugin calls made with a ctx.
	withHeaders func(context.Context, http.Header) context.Context
	logBodies   bool
	logHeaders  []string // request headers for --log-bodies, sensitive ones redacted
	global      cpex.GlobalContext
	forwarded   map[string]string // request headers forwarded to tool_pre_invoke

	// wantRequestBody: the request-headers reply asked for the body.
	wantRequestBody bool
	sawRequestBody  bool
	// pending are the requests of this stream whose response a post hook
	// applies to, by raw JSON-RPC id.
	pending map[string]*pendingCall

	mode    responseMode
	sse     *sse.Decoder
	sseDead bool // the SSE stream overflowed and is being dropped (fail closed)
}

// pendingCall is a hooked request waiting for its response.
type pendingCall struct {
	post   cpex.HookType
	target string // tool name, prompt name or resource uri
	rc     *executor.RequestContext
}

func newStream(ctx context.Context, snap *Snapshot, opts *Options, c *canned) *stream {
	return &stream{ctx: ctx, snap: snap, log: opts.Logger, obs: opts.Observer, canned: c,
		withHeaders: opts.WithHeaders, logBodies: opts.LogBodies && opts.Logger.GetLevel() <= zerolog.DebugLevel}
}

// redactHeader hides the value of credential headers in --log-bodies logs.
func redactHeader(k, v string) string {
	if config.IsCredentialHeader(k) {
		return "[redacted]"
	}
	return v
}

// requestHeaders decides whether this request can carry a hooked MCP message.
// Only a POST to an MCP path needs its body; everything else (GET SSE streams,
// DELETE, non-MCP paths) is told to skip bodies and response headers.
func (st *stream) requestHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	var method, path, authority, encoding string
	set := st.snap.Settings
	for _, hv := range h.GetHeaders().GetHeaders() {
		// Values are converted to strings only for the headers used.
		k := hv.GetKey()
		switch k {
		case ":method":
			method = headerValue(hv)
		case ":path":
			path = headerValue(hv)
		case ":authority":
			authority = headerValue(hv)
		case "x-request-id":
			st.requestID = headerValue(hv)
		case "mcp-session-id":
			st.sessionID = headerValue(hv)
		case "content-encoding":
			encoding = strings.ToLower(strings.TrimSpace(headerValue(hv)))
		case "traceparent", "tracestate":
			if st.trace == nil {
				st.trace = make(http.Header, 3)
			}
			st.trace.Set(k, headerValue(hv))
		}
		if st.logBodies {
			st.logHeaders = append(st.logHeaders, k, redactHeader(k, headerValue(hv)))
		}
		// Configured headers may name any header, the ones above included.
		if k == "" {
			continue
		}
		if k == set.UserHeader {
			st.global.User = userJSON(headerValue(hv))
		}
		if k == set.TenantHeader {
			st.global.TenantID = headerValue(hv)
		}
		if k == set.ServerHeader {
			st.global.ServerID = headerValue(hv)
		}
		if forwardHeader(set.ForwardHeaders, k) {
			if st.forwarded == nil {
				st.forwarded = make(map[string]string)
			}
			st.forwarded[k] = headerValue(hv)
		}
	}
	if method != http.MethodPost || !set.IsMCPPath(path) || !st.anyHook() {
		st.obs.ModeOverride("skip")
		return st.canned.skipAll
	}
	if encoding != "identity" {
		st.encoding = encoding
	}
	st.path, st.authority = path, authority
	if h.GetEndOfStream() {
		// A POST without a body holds no MCP message; the server answers it.
		st.obs.ModeOverride("skip")
		return st.canned.skipAll
	}
	st.wantRequestBody = true
	st.obs.ModeOverride("request_buffered")
	return st.canned.inspectRequest
}

// ensureContext fills in what only a plugin call or a log line needs: the
// request id (generated when the request has none), the plugin context
// metadata, the headers that follow the call into plugins (trace context,
// x-request-id), and the logger's fields. A request no plugin applies to
// never pays for it.
func (st *stream) ensureContext() {
	if st.contextReady {
		return
	}
	st.contextReady = true
	if st.requestID == "" {
		st.requestID = rand.Text()
	}
	st.log = st.log.With().Str("request_id", st.requestID).Str("mcp_session_id", st.sessionID).Logger()
	st.global.RequestID = st.requestID
	st.global.Metadata = map[string]any{"path": st.path, "authority": st.authority}
	if st.sessionID != "" {
		st.global.Metadata["mcp_session_id"] = st.sessionID
	}
	if st.trace != nil {
		for k := range st.trace {
			st.global.Metadata[strings.ToLower(k)] = st.trace.Get(k)
		}
		st.trace.Set("x-request-id", st.requestID)
		if st.withHeaders != nil {
			st.ctx = st.withHeaders(st.ctx, st.trace)
		}
	} else if st.withHeaders != nil {
		st.ctx = st.withHeaders(st.ctx, http.Header{"X-Request-Id": {st.requestID}})
	}
}

// logger returns the stream's logger with the request fields set.
func (st *stream) logger() *zerolog.Logger {
	st.ensureContext()
	return &st.log
}

// anyHook reports whether any MCP hook has a plugin.
func (st *stream) anyHook() bool {
	for _, h := range cpex.MCPHooks {
		if st.snap.Hooks.Applies(h) {
			return true
		}
	}
	return false
}

// requestBody inspects the buffered request body.
func (st *stream) requestBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	st.sawRequestBody = true
	if !st.wantRequestBody {
		return st.canned.requestBodyAsIs
	}
	body := b.GetBody()
	if max := st.snap.Settings.MaxBodyBytes; max > 0 && int64(len(body)) > max {
		st.obs.Immediate("too_large")
		st.logger().Warn().Int("bytes", len(body)).Int64("limit", max).Msg("refused: request body over the inspection limit")
		return jsonRPCReply(http.StatusRequestEntityTooLarge, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInvalidRequest,
			fmt.Sprintf("request body of %d bytes exceeds the inspection limit of %d bytes", len(body), max), nil), false, nil)
	}
	decoded := false
	if st.encoding != "" {
		// A body the sidecar cannot read must not reach the server
		// uninspected: decode it, inspect it, and forward the decoded bytes
		// (content-encoding removed), so the server reads exactly what the
		// plugins saw.
		limit := st.snap.Settings.MaxBodyBytes
		if limit <= 0 {
			limit = 1 << 20
		}
		out, err := contentcoding.Decode(st.encoding, body, limit)
		switch {
		case errors.Is(err, contentcoding.ErrTooLarge):
			st.obs.Immediate("too_large")
			st.logger().Warn().Str("content_encoding", st.encoding).Int64("limit", limit).Msg("refused: decoded request body over the inspection limit")
			return jsonRPCReply(http.StatusRequestEntityTooLarge, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInvalidRequest,
				fmt.Sprintf("decoded request body exceeds the inspection limit of %d bytes", limit), nil), false, nil)
		case err != nil:
			st.obs.Immediate("unsupported_encoding")
			st.logger().Warn().Err(err).Msg("refused: request body cannot be decoded")
			return jsonRPCReply(http.StatusUnsupportedMediaType, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInvalidRequest,
				"request body cannot be inspected: "+err.Error(), nil), false, nil)
		}
		body, decoded = out, true
	}
	st.obs.BodyInspected("request", len(body))
	if st.logBodies {
		st.logger().Debug().Strs("headers", st.logHeaders).Bytes("body", body).Msg("request body (--log-bodies)")
	}
	msgs, err := mcpmsg.Parse(body)
	if err != nil {
		code, reason := mcpmsg.CodeParseError, err.Error()
		var id []byte
		var e *mcpmsg.Error
		if errors.As(err, &e) {
			code, reason, id = e.Code, e.Message, e.ID
		}
		st.obs.Immediate("invalid_request")
		st.logger().Info().Str("reason", reason).Msg("refused: invalid JSON-RPC body")
		return jsonRPCReply(http.StatusBadRequest, mcpmsg.ErrorResponse(id, code, reason, nil), false, nil)
	}
	var (
		replaced   map[int][]byte
		refusals   []refusal
		setHeaders map[string]string
	)
	for i := range msgs.Messages {
		m := &msgs.Messages[i]
		if m.Kind != mcpmsg.KindRequest && m.Kind != mcpmsg.KindNotification {
			continue
		}
		hook, post, ok := preHook(m.Method)
		if !ok {
			continue
		}
		call := callOf(hook, m)
		// Conditions first: a message no plugin selects costs no payload
		// work and no response inspection.
		runPre := st.snap.Hooks.AppliesTo(hook, &st.global, call.executorTarget(hook))
		wantPost := m.ID != nil && st.snap.Hooks.AppliesTo(post, &st.global, targetFor(post, call.target))
		if !runPre && !wantPost {
			continue
		}
		st.ensureContext()
		rc := executor.NewRequestContext(st.global)
		if wantPost {
			if st.pending == nil {
				st.pending = make(map[string]*pendingCall)
			}
			st.pending[string(m.ID)] = &pendingCall{post: post, target: call.target, rc: rc}
		}
		if !runPre {
			continue
		}
		payload, err := call.payload(hook, st.forwarded)
		if err != nil {
			refusals = append(refusals, refusal{index: i, id: m.ID, code: mcpmsg.CodeInvalidParams, message: err.Error(), status: http.StatusBadRequest, reason: "invalid_request"})
			continue
		}
		out := st.snap.Hooks.Run(st.ctx, hook, payload, rc, call.executorTarget(hook))
		if r, blocked := st.refusalOf(out, i, m.ID, hook); blocked {
			refusals = append(refusals, r)
			continue
		}
		if out.Modified {
			msg, hdrs, err := rewriteRequest(*m, hook, out.Payload, st.forwarded)
			if err != nil {
				refusals = append(refusals, refusal{index: i, id: m.ID, code: mcpmsg.CodeInternalError,
					message: "plugin returned an unusable payload: " + err.Error(), status: http.StatusOK, reason: "plugin_error"})
				continue
			}
			if replaced == nil {
				replaced = make(map[int][]byte)
			}
			replaced[i] = msg
			for k, v := range hdrs {
				if setHeaders == nil {
					setHeaders = make(map[string]string)
				}
				setHeaders[k] = v
			}
			st.logger().Debug().Str("hook", string(hook)).Str("target", call.target).Msg("request rewritten by plugins")
		}
	}
	if len(refusals) > 0 {
		return st.refuse(msgs, refusals)
	}
	if replaced == nil && setHeaders == nil && !decoded {
		return st.canned.requestBodyAsIs
	}
	newBody := body
	if replaced != nil {
		newBody = mcpmsg.Join(msgs, replaced)
	}
	resp := bodyReply(false, newBody, true)
	cr := resp.GetRequestBody().GetResponse()
	if decoded {
		cr.HeaderMutation.RemoveHeaders = append(cr.HeaderMutation.RemoveHeaders, "content-encoding")
	}
	for k, v := range setHeaders {
		cr.HeaderMutation.SetHeaders = append(cr.HeaderMutation.SetHeaders, header(k, v))
	}
	return resp
}

// responseHeaders picks the response body mode: NONE when no post hook can
// apply, BUFFERED for JSON, STREAMED for SSE (contract §3.1, §3.2).
func (st *stream) responseHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	if st.wantRequestBody && !st.sawRequestBody {
		// We asked for the request body and never got it: Envoy ignored our
		// mode_override, so no pre hook ran. Never pass that silently.
		st.obs.Immediate("internal")
		st.logger().Error().Msg("request body was never sent: set allow_mode_override: true on the ext_proc filter")
		return jsonRPCReply(http.StatusInternalServerError, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInternalError,
			"mcp-extproc misconfigured: Envoy did not send the request body (allow_mode_override must be true)", nil), false, nil)
	}
	if len(st.pending) == 0 || h.GetEndOfStream() {
		st.obs.ModeOverride("response_none")
		return st.canned.responseNone
	}
	var status int
	var contentType string
	for _, hv := range h.GetHeaders().GetHeaders() {
		switch hv.GetKey() {
		case ":status":
			status, _ = strconv.Atoi(headerValue(hv))
		case "content-type":
			contentType = headerValue(hv)
		}
	}
	mediaType, _, _ := mime.ParseMediaType(contentType)
	switch {
	case status < 200 || status > 299:
		st.obs.ModeOverride("response_none")
		return st.canned.responseNone
	case mediaType == "application/json":
		st.mode = respBuffered
		st.obs.ModeOverride("response_buffered")
		return st.canned.responseBuffered
	case mediaType == "text/event-stream":
		st.mode = respStreamed
		st.sse = sse.NewDecoder(int(st.snap.Settings.MaxBodyBytes))
		st.obs.ModeOverride("response_streamed")
		// Envoy decided about content-length under the old mode; a rewritten
		// stream changes the length, so drop it here (contract §4).
		return responseHeadersReply(modeResponse(filterv3.ProcessingMode_STREAMED),
			&extprocv3.HeaderMutation{RemoveHeaders: []string{"content-length"}})
	default:
		st.obs.ModeOverride("response_none")
		return st.canned.responseNone
	}
}

// responseBody runs post hooks on a buffered JSON body or on SSE chunks.
func (st *stream) responseBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	switch st.mode {
	case respBuffered:
		return st.bufferedResponse(b.GetBody())
	case respStreamed:
		return st.streamedResponse(b.GetBody(), b.GetEndOfStream())
	default:
		return st.canned.responseBodyAsIs
	}
}

func (st *stream) bufferedResponse(body []byte) *extprocv3.ProcessingResponse {
	if max := st.snap.Settings.MaxBodyBytes; max > 0 && int64(len(body)) > max {
		return st.tooLargeResponse(len(body))
	}
	st.obs.BodyInspected("response", len(body))
	msgs, err := mcpmsg.Parse(body)
	if err != nil {
		// The server's own answer is not JSON-RPC: nothing to hook, and the
		// client will report it. Log, do not rewrite.
		st.logger().Warn().Err(err).Msg("response body is not valid JSON-RPC; passed unchanged")
		return st.canned.responseBodyAsIs
	}
	replaced := st.postHooks(msgs)
	if replaced == nil {
		return st.canned.responseBodyAsIs
	}
	return bodyReply(true, mcpmsg.Join(msgs, replaced), true)
}

// tooLargeResponse applies the on_error policy to a response body that
// cannot be inspected: fail closed answers every pending id with an error,
// fail open passes the body unchanged.
func (st *stream) tooLargeResponse(n int) *extprocv3.ProcessingResponse {
	max := st.snap.Settings.MaxBodyBytes
	if !st.pendingFailClosed() {
		st.logger().Warn().Int("bytes", n).Int64("limit", max).Msg("response over the inspection limit passed uninspected (plugins fail open)")
		return st.canned.responseBodyAsIs
	}
	st.obs.Immediate("too_large")
	st.logger().Warn().Int("bytes", n).Int64("limit", max).Msg("refused: response over the inspection limit")
	var errs [][]byte
	for _, id := range st.pendingIDs() {
		errs = append(errs, mcpmsg.ErrorResponse([]byte(id), mcpmsg.CodeInternalError,
			fmt.Sprintf("response of %d bytes exceeds the inspection limit of %d bytes", n, max), nil))
	}
	st.pending = nil
	body := errs[0]
	if len(errs) > 1 {
		body = joinArray(errs)
	}
	return bodyReply(true, body, true)
}

// pendingIDs returns the ids of the pending requests in a stable order, so
// errors written for several of them come out the same way every time.
func (st *stream) pendingIDs() []string {
	return slices.Sorted(maps.Keys(st.pending))
}

func (st *stream) pendingFailClosed() bool {
	for _, p := range st.pending {
		if st.snap.Hooks.FailClosed(p.post) {
			return true
		}
	}
	return false
}

// streamedResponse handles one SSE chunk: complete events are re-emitted as
// they were, except the data of a hooked result; an incomplete event is held
// until its end arrives, and at the end of the stream a last unterminated
// event is inspected too. Every chunk is answered at once; a chunk whose bytes
// all go out unchanged is answered without a mutation.
func (st *stream) streamedResponse(chunk []byte, eos bool) *extprocv3.ProcessingResponse {
	if st.sseDead {
		return bodyReply(true, []byte{}, false)
	}
	// prev stays valid through this Feed: the decoder only appends past
	// it or sets its buffer aside.
	prev := st.sse.Pending()
	heldBefore := len(prev)
	events, err := st.sse.Feed(chunk)
	if err != nil {
		return st.sseOverflow(err, prev, chunk, events)
	}
	// The events are valid until the next Feed or Flush: use them first.
	var out []byte
	built := false // out, not chunk, is the reply body
	for i := range events {
		ev := &events[i]
		raw := st.sseEvent(ev)
		if raw == nil && !built {
			continue
		}
		if !built {
			built = true
			n := len(raw)
			for _, ev := range events {
				n += len(ev.Raw)
			}
			out = make([]byte, 0, n)
			for _, prev := range events[:i] {
				out = append(out, prev.Raw...)
			}
		}
		if raw == nil {
			raw = ev.Raw
		}
		out = append(out, raw...)
	}
	held := st.sse.Pending()
	if !built && (heldBefore > 0 || len(held) > 0) {
		// Earlier held bytes go out with this chunk, or part of it is held.
		built = true
		n := 0
		for _, ev := range events {
			n += len(ev.Raw)
		}
		out = make([]byte, 0, n)
		for _, ev := range events {
			out = append(out, ev.Raw...)
		}
	}
	if eos {
		if ev, ok := st.sse.Flush(); ok {
			// The server ended the stream inside an event. Some clients
			// dispatch such an event, so it is inspected like any other.
			raw := st.sseEvent(&ev)
			if raw == nil {
				raw = ev.Raw
			}
			out = append(out, raw...)
		}
	}
	if !built {
		return st.canned.responseBodyAsIs // byte for byte, no copy
	}
	return bodyReply(true, out, false)
}

// sseEvent runs post hooks on the JSON-RPC messages of one event and returns
// the rewritten event, or nil when it passes unchanged.
func (st *stream) sseEvent(ev *sse.Event) []byte {
	if len(st.pending) == 0 || len(ev.Data) == 0 || !mcpmsg.MayBeResponse(ev.Data) {
		return nil
	}
	msgs, err := mcpmsg.Parse(ev.Data)
	if err != nil {
		return nil // not JSON-RPC (a ping, a comment-like payload): not ours to judge
	}
	st.obs.BodyInspected("response", len(ev.Data))
	replaced := st.postHooks(msgs)
	if replaced == nil {
		return nil
	}
	return ev.WithData(mcpmsg.Join(msgs, replaced))
}

// sseOverflow handles an SSE event larger than the inspection limit: fail
// open passes the rest of the stream untouched; fail closed answers every
// pending id with an error event and drops the rest, so the client sees a
// well-formed stream and never a truncated result.
func (st *stream) sseOverflow(err error, prev, chunk []byte, complete []sse.Event) *extprocv3.ProcessingResponse {
	if !st.pendingFailClosed() {
		// Everything not yet sent — the bytes held before this chunk, and
		// the chunk — goes out as it came.
		unsent := make([]byte, 0, len(prev)+len(chunk))
		unsent = append(append(unsent, prev...), chunk...)
		st.logger().Warn().Err(err).Msg("SSE event over the inspection limit passed uninspected (plugins fail open)")
		st.mode = respNone
		return bodyReply(true, unsent, false)
	}
	st.logger().Warn().Err(err).Msg("refused: SSE event over the inspection limit")
	st.obs.Immediate("too_large")
	st.sseDead = true
	// The events completed before the oversized one go out as usual (their
	// hooks run); the pending ids left get an error event each.
	var out []byte
	for i := range complete {
		if raw := st.sseEvent(&complete[i]); raw != nil {
			out = append(out, raw...)
		} else {
			out = append(out, complete[i].Raw...)
		}
	}
	for _, id := range st.pendingIDs() {
		data := mcpmsg.ErrorResponse([]byte(id), mcpmsg.CodeInternalError,
			fmt.Sprintf("result exceeds the inspection limit of %d bytes", st.snap.Settings.MaxBodyBytes), nil)
		out = append(out, "event: message\ndata: "...)
		out = append(out, data...)
		out = append(out, "\n\n"...)
	}
	st.pending = nil
	return bodyReply(true, out, false)
}

// postHooks runs the post hook of every response in msgs whose id is pending
// and returns the replaced elements, or nil when nothing changed.
func (st *stream) postHooks(msgs *mcpmsg.Body) map[int][]byte {
	var replaced map[int][]byte
	for i := range msgs.Messages {
		m := &msgs.Messages[i]
		if m.Kind != mcpmsg.KindResponse && m.Kind != mcpmsg.KindError {
			continue
		}
		p, ok := st.pending[string(m.ID)]
		if !ok {
			continue
		}
		delete(st.pending, string(m.ID))
		if m.Kind == mcpmsg.KindError {
			continue // the server refused; nothing to inspect
		}
		payload, err := postPayload(p.post, p.target, m.Result)
		var out executor.Outcome
		if err == nil {
			out = st.snap.Hooks.Run(st.ctx, p.post, payload, p.rc, targetFor(p.post, p.target))
		}
		var msg []byte
		if err != nil {
			msg = mcpmsg.ErrorResponse(m.ID, mcpmsg.CodeInternalError, "response cannot be inspected: "+err.Error(), nil)
		} else if r, blocked := st.refusalOf(out, i, m.ID, p.post); blocked {
			msg = r.errorResponse()
		} else if out.Modified {
			result, err := resultOf(p.post, out.Payload)
			if err == nil {
				msg, err = mcpmsg.ReplaceResult(*m, result)
			}
			if err != nil {
				st.logger().Warn().Err(err).Str("hook", string(p.post)).Msg("plugin returned an unusable result; refused")
				msg = mcpmsg.ErrorResponse(m.ID, mcpmsg.CodeInternalError, "plugin returned an unusable result: "+err.Error(), nil)
			}
		} else {
			continue
		}
		if replaced == nil {
			replaced = make(map[int][]byte)
		}
		replaced[i] = msg
	}
	return replaced
}

func internalError(st *stream, reason string) *extprocv3.ProcessingResponse {
	st.obs.Immediate("internal")
	return jsonRPCReply(http.StatusInternalServerError, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInternalError, reason, nil), false, nil)
}

func headerValue(hv *corev3.HeaderValue) string {
	if raw := hv.GetRawValue(); len(raw) > 0 {
		return string(raw)
	}
	return hv.GetValue()
}

// userJSON keeps a user header as a JSON string for the plugin context.
func userJSON(v string) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func forwardHeader(list []string, key string) bool {
	for _, h := range list {
		if h == key {
			return true
		}
	}
	return false
}

func joinArray(elems [][]byte) []byte {
	n := 2
	for _, e := range elems {
		n += len(e) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, ']')
}
