package processor

import (
	"errors"
	"fmt"
	"net/http"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/contentcoding"
	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// requestHeaders decides whether this request can carry a hooked MCP message
// and asks Envoy for only what a hook can use (decide.go): nothing more for
// GET SSE streams, DELETE, non-MCP paths and, with trusted MCP 2026-07-28
// headers, methods or targets no plugin selects; the body otherwise, and the
// response headers only when a post hook may apply.
func (st *stream) requestHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	method, path, authority, encoding, repeated := st.readRequestHeaders(h)
	if method != "" && st.snap.Settings.IsMCPPath(path) {
		if repeated != "" {
			return st.repeatedHeader(repeated)
		}
		// Who is calling, and the HTTP-level hooks (httphooks.go).
		if refused := st.beforeMCP(h, method, path); refused != nil {
			return refused
		}
		if st.httpRefusal != nil {
			// Refused at the body, to answer with the request's id.
			st.phase = phaseRequestBody
			return st.canned.inspectRequestOnly
		}
	}
	return st.withResponseHeaders(withSetHeaders(st.decideRequest(h, method, path, authority, encoding), (*extprocv3.ProcessingResponse).GetRequestHeaders, st.headerSets))
}

// decideRequest chooses what to ask Envoy for (see requestHeaders).
func (st *stream) decideRequest(h *extprocv3.HttpHeaders, method, path string, authority []byte, encoding string) *extprocv3.ProcessingResponse {
	if method != http.MethodPost || !st.snap.Settings.IsMCPPath(path) || !st.anyHook() {
		return st.otherRequest(h, method, path, authority)
	}
	st.encoding = encoding
	st.path, st.authority = path, string(authority)
	if h.GetEndOfStream() {
		// A POST without a body holds no MCP message; the server answers it.
		return st.passThrough()
	}
	st.headers = h.GetHeaders() // read again only if a body check needs them (headers.go)
	st.mcpFilterMethod()
	if refused := st.checkDeclaredMethod(); refused != nil {
		return refused
	}
	return st.askForBody()
}

// knownMethod returns the HTTP method the processor tells apart (POST,
// GET, DELETE) as a constant, without allocating; "" for any other.
func knownMethod(b []byte) string {
	for _, m := range [...]string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		if string(b) == m {
			return m
		}
	}
	return ""
}

func (st *stream) passThrough() *extprocv3.ProcessingResponse {
	st.phase = phasePassThrough
	st.obs.ModeOverride("skip")
	return st.canned.skipAll
}

// readRequestHeaders keeps what the stream needs from the request headers
// and returns the ones requestHeaders decides on; repeated names a header
// that says which session or stream a request belongs to and was sent more
// than once (repeatedHeader).
func (st *stream) readRequestHeaders(h *extprocv3.HttpHeaders) (method, path string, authority []byte, encoding, repeated string) {
	set := st.snap.Settings
	var seen sessionHeaders
	for _, hv := range h.GetHeaders().GetHeaders() {
		// Values are converted to strings only for the headers used, and
		// those only a plugin call needs only when one is made
		// (ensureContext, declared): passthrough allocates little.
		k := hv.GetKey()
		switch k {
		case ":method":
			method = knownMethod(headerBytes(hv))
		case ":path":
			path = headerValue(hv)
		case ":authority":
			authority = headerBytes(hv)
		case "x-request-id":
			st.raw.requestID = hv
		case "mcp-session-id":
			st.sessionID = headerValue(hv)
			repeated = seen.add(k, repeated)
		case "last-event-id":
			repeated = seen.add(k, repeated)
		case "content-encoding":
			encoding = contentcoding.Normalize(headerValue(hv))
		case "traceparent":
			st.raw.traceparent = hv
		case "tracestate":
			st.raw.tracestate = hv
		case "mcp-protocol-version":
			st.std.add(k, hv)
			repeated = seen.add(k, repeated)
		case "mcp-method", "mcp-name":
			st.std.add(k, hv)
		}
		if st.logBodies {
			st.logHeaders = append(st.logHeaders, logsafe.Cap(k, logsafe.DefaultCap), logsafe.Cap(redactHeader(k, headerValue(hv)), logsafe.DefaultCap))
		}
		// Configured headers may name any header, the ones above included.
		if k == "" {
			continue
		}
		st.readConfiguredHeader(set, k, hv)
	}
	return method, path, authority, encoding, repeated
}

// sessionHeaders counts the request headers that name the request's MCP
// session, protocol version and resumed stream. Sent twice, the sidecar
// and the server may each believe another copy (the Go SDK serves the
// first Mcp-Session-Id, Envoy's last would be recorded): the request's
// ids would be recorded, or a replay looked up, in a session the server
// does not serve.
type sessionHeaders struct{ session, version, lastEvent uint8 }

// add counts header k and returns the name of the first header seen twice
// (repeated, or k).
func (s *sessionHeaders) add(k, repeated string) string {
	n := &s.session
	switch k {
	case "mcp-protocol-version":
		n = &s.version
	case "last-event-id":
		n = &s.lastEvent
	}
	if *n++; *n == 2 && repeated == "" {
		return k
	}
	return repeated
}

// repeatedHeader refuses a request that names its session, protocol
// version or resumed stream more than once: HTTP 400 with a JSON-RPC
// error saying which header.
func (st *stream) repeatedHeader(name string) *extprocv3.ProcessingResponse {
	st.phase = phasePassThrough
	st.obs.Immediate("repeated_header")
	st.logger().Info().Str("header", name).Msg("refused: header sent more than once")
	return jsonRPCReply(http.StatusBadRequest, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInvalidRequest,
		"invalid request: header "+name+" sent more than once", nil), false, nil)
}

// readConfiguredHeader keeps a header the configuration names for the
// plugin context or the forwarded headers, when it is within
// MaxForwardedHeaderBytes.
func (st *stream) readConfiguredHeader(set *config.Extproc, k string, hv *corev3.HeaderValue) {
	user, tenant, server, fwd := k == set.UserHeader, k == set.TenantHeader, k == set.ServerHeader, forwardHeader(set.ForwardHeaders, k)
	if !user && !tenant && !server && !fwd {
		return
	}
	v, ok := st.boundedValue(k, headerValue(hv), MaxForwardedHeaderBytes)
	if !ok {
		return
	}
	if user {
		st.global.User = userJSON(v)
	}
	if tenant {
		st.global.TenantID = v
	}
	if server {
		st.global.ServerID = v
	}
	if fwd {
		if st.forwarded == nil {
			st.forwarded = make(map[string]string)
		}
		st.forwarded[k] = v
	}
}

// requestBody inspects the buffered request body: limits and decoding,
// parsing, the pre hooks of every hooked message, then the reply (refusal,
// rewrite, or the body as is).
func (st *stream) requestBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if st.phase != phaseRequestBody && st.phase != phaseRequestSeen {
		return st.canned.requestBodyAsIs
	}
	st.phase = phaseRequestSeen
	if st.httpRefusal != nil {
		return st.refuseAtBody(b.GetBody())
	}
	body, decoded, refused := st.readRequestBody(b.GetBody())
	if refused != nil {
		return refused
	}
	msgs, err := mcpmsg.Parse(body)
	if err != nil {
		return st.invalidRequest(err)
	}
	if refused := st.checkStandardHeaders(msgs); refused != nil {
		return refused
	}
	if refused := st.checkMCPFilterMethod(msgs); refused != nil {
		return refused
	}
	var ed requestEdits
	for i := range msgs.Messages {
		m := &msgs.Messages[i]
		st.msgContext = nil // each message's hooks share one context (requestContext)
		if r, refused := st.checkRules(i, m); refused {
			ed.refusals = append(ed.refusals, r) // rules.go
			continue
		}
		if r, refused := st.checkPinnedCall(i, m); refused {
			ed.refusals = append(ed.refusals, r) // pinning.go
			continue
		}
		if r, refused := st.checkPermission(i, m); refused {
			ed.refusals = append(ed.refusals, r) // permission.go
			continue
		}
		st.preHook(i, m, &ed)
		st.delegate(i, m, &ed) // delegate.go
		st.listRequest(m)      // rules.go
	}
	if msgs.Batch {
		st.msgContext = nil // http_post_request gets the HTTP hooks' context (httppost.go)
	}
	st.decideBody(msgs, &ed)
	if len(ed.refusals) > 0 {
		return st.refuse(msgs, ed.refusals)
	}
	st.remember(msgs)
	st.ownIDs(msgs)
	return st.forwardRequest(body, msgs, &ed, decoded)
}

// readRequestBody applies the inspection limit and decodes a
// content-encoded body. A body the sidecar cannot read must not reach the
// server uninspected: it is decoded, inspected, and forwarded decoded
// (content-encoding removed), so the server reads exactly what the plugins
// saw. refused is the reply when the body cannot be inspected.
func (st *stream) readRequestBody(body []byte) (out []byte, decoded bool, refused *extprocv3.ProcessingResponse) {
	max := st.snap.Settings.MaxBodyBytes
	if max > 0 && int64(len(body)) > max {
		st.logger().Warn().Int("bytes", len(body)).Int64("limit", max).Msg("refused: request body over the inspection limit")
		return nil, false, st.refuseBody(http.StatusRequestEntityTooLarge, "too_large",
			fmt.Sprintf("request body of %d bytes exceeds the inspection limit of %d bytes", len(body), max))
	}
	if st.encoding != "" {
		limit := st.decodedLimit()
		dec, err := contentcoding.Decode(st.encoding, body, limit)
		switch {
		case errors.Is(err, contentcoding.ErrTooLarge):
			st.logger().Warn().Str("content_encoding", logsafe.Cap(st.encoding, logsafe.DefaultCap)).Int64("limit", limit).Msg("refused: decoded request body over the inspection limit")
			return nil, false, st.refuseBody(http.StatusRequestEntityTooLarge, "too_large",
				fmt.Sprintf("decoded request body exceeds the inspection limit of %d bytes", limit))
		case err != nil:
			st.logger().Warn().Str("error", logsafe.Cap(err.Error(), logsafe.DefaultCap)).Msg("refused: request body cannot be decoded")
			return nil, false, st.refuseBody(http.StatusUnsupportedMediaType, "unsupported_encoding",
				"request body cannot be inspected: "+err.Error())
		}
		body, decoded = dec, true
	}
	st.obs.BodyInspected("request", len(body))
	if st.logBodies {
		st.logger().Debug().Strs("headers", st.logHeaders).Str("body", logsafe.Cap(string(body), maxLoggedBody)).Msg("request body (--log-bodies)")
	}
	return body, decoded, nil
}

// decodedLimit caps a content-encoded body once decoded, request or
// answer: max_body_bytes, or 1 MiB when that is unlimited.
func (st *stream) decodedLimit() int64 {
	if max := st.snap.Settings.MaxBodyBytes; max > 0 {
		return max
	}
	return 1 << 20
}

// maxLoggedBody bounds the body logged with --log-bodies, so the line stays
// well under logsafe.MaxLine with its headers.
const maxLoggedBody = 8 << 10

// refuseBody answers a request whose body cannot be inspected with an
// id-less JSON-RPC invalid-request error.
func (st *stream) refuseBody(status int, reason, message string) *extprocv3.ProcessingResponse {
	st.obs.Immediate(reason)
	return jsonRPCReply(status, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInvalidRequest, message, nil), false, nil)
}

// invalidRequest answers a body that is not valid JSON-RPC.
func (st *stream) invalidRequest(err error) *extprocv3.ProcessingResponse {
	code, reason := mcpmsg.CodeParseError, err.Error()
	var id []byte
	var e *mcpmsg.Error
	if errors.As(err, &e) {
		code, reason, id = e.Code, e.Message, e.ID
	}
	st.obs.Immediate("invalid_request")
	st.logger().Info().Str("reason", logsafe.Cap(reason, logsafe.DefaultCap)).Msg("refused: invalid JSON-RPC body")
	return jsonRPCReply(http.StatusBadRequest, mcpmsg.ErrorResponse(id, code, reason, nil), false, nil)
}

// forwardRequest lets the request go on: as is when nothing changed, else
// with the rewritten messages, the headers plugins set, and without
// content-encoding when the body was decoded.
func (st *stream) forwardRequest(body []byte, msgs *mcpmsg.Body, ed *requestEdits, decoded bool) *extprocv3.ProcessingResponse {
	if ed.replaced == nil && ed.headers == nil && ed.remove == nil && !decoded {
		return st.canned.requestBodyAsIs
	}
	if ed.replaced != nil {
		body = mcpmsg.Join(msgs, ed.replaced)
	}
	resp := bodyReply(false, body, true)
	cr := resp.GetRequestBody().GetResponse()
	if decoded {
		cr.HeaderMutation.RemoveHeaders = append(cr.HeaderMutation.RemoveHeaders, "content-encoding")
	}
	cr.HeaderMutation.RemoveHeaders = append(cr.HeaderMutation.RemoveHeaders, ed.remove...)
	for k, v := range ed.headers {
		cr.HeaderMutation.SetHeaders = append(cr.HeaderMutation.SetHeaders, header(k, v))
	}
	return resp
}
