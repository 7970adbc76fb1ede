package processor

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/audit"
	"github.com/mcp-extproc/mcp-extproc/pkg/contentcoding"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpheaders"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// The request body of an MCP POST is read whole (BUFFERED), checked
// against the headers, parsed, and each JSON-RPC request or notification
// of it goes through what applies to it, in this order (checkMessage):
// the rules (rules.go), pinning (pinning.go), http_auth_check_permission
// (permission.go), its family's pre hook (preHook, below), token_delegate
// (delegate.go). The first refusal of a message ends its checks. Then the
// body is refused (refuse), or forwarded as is or rewritten.

// bodyInspection is the inspection of one request body: the messages and
// what their checks decided.
type bodyInspection struct {
	x    *exchange
	msgs *mcpmsg.Body
	// replaced are rewritten messages, by index.
	replaced map[int][]byte
	// headers to set on the upstream request, and to remove from it.
	headers map[string]string
	remove  []string
	// delegated: token_delegate set the upstream credential.
	delegated bool
	refusals  []refusal
	// event is the audit event of the message being checked (-1: none).
	event int
}

// requestBody inspects the buffered request body: limits and decoding,
// parsing, the checks and hooks of every message, then the reply
// (refusal, rewrite, or the body as is).
func (x *exchange) requestBody(raw []byte) *extprocv3.ProcessingResponse {
	if x.http.refusal != nil {
		return x.refuseAtBody(raw)
	}
	body, decoded, refused := x.readRequestBody(raw)
	if refused != nil {
		return refused
	}
	msgs, err := mcpmsg.Parse(body)
	if err != nil {
		return x.invalidRequest(err)
	}
	b := &bodyInspection{x: x, msgs: msgs, event: -1}
	if refused := b.checkStandardHeaders(); refused != nil {
		return refused
	}
	if refused := b.checkMCPFilterMethod(); refused != nil {
		return refused
	}
	for i := range msgs.Messages {
		x.hookCtx.msg = nil // each message's hooks share one context (requestContext)
		if r, refused := b.checkMessage(i, &msgs.Messages[i]); refused {
			b.refusals = append(b.refusals, r)
		}
	}
	if msgs.Batch {
		x.hookCtx.msg = nil // http_post_request gets the HTTP hooks' context
	}
	b.decide()
	if len(b.refusals) > 0 {
		return x.refuse(msgs, b.refusals)
	}
	x.results.forwarded(msgs)
	return b.forward(body, decoded)
}

// checkMessage runs what applies to message i; it returns the refusal
// that ends its checks.
func (b *bodyInspection) checkMessage(i int, m *mcpmsg.Message) (refusal, bool) {
	if m.Kind != mcpmsg.KindRequest && m.Kind != mcpmsg.KindNotification {
		return refusal{}, false
	}
	x := b.x
	b.event = -1
	if x.trail.recording {
		x.ensureContext() // the request id, and the span the event names
		name, _ := messageTarget(m)
		b.event = x.trail.message(m, name)
	}
	// Each check runs only when the configuration has what it checks
	// with: rules, pins, a plugin on its hook. The pre hook decides its
	// own (its hook depends on the method).
	snap := x.snap
	if snap.Rules.Len() > 0 {
		if r, refused := b.checkRules(i, m); refused && !b.shadowed(m, &r) {
			return r, true
		}
	}
	if snap.Pins != nil {
		if r, refused := b.checkPinnedCall(i, m); refused && !b.shadowed(m, &r) {
			return r, true
		}
	}
	if x.hooked.permission {
		if r, refused := b.checkPermission(i, m); refused && !b.shadowed(m, &r) {
			return r, true
		}
	}
	if r, refused := b.preHook(i, m); refused && !b.shadowed(m, &r) {
		return r, true
	}
	if x.hooked.delegate {
		if r, refused := b.delegate(i, m); refused && !b.shadowed(m, &r) {
			return r, true
		}
	}
	x.results.expectList(m, b.event) // a list the rules, pinning or a list hook read
	return refusal{}, false
}

// shadowed records refusal r on the message's audit event and span, and
// reports whether it only shadows: under extproc.shadow a plugin's or a
// rule's refusal lets the message through, said as would_deny (a
// protocol error, such as invalid params, is always answered).
func (b *bodyInspection) shadowed(m *mcpmsg.Message, r *refusal) bool {
	shadow := b.x.shadow() && r.denied
	b.record(m, r, shadow)
	if shadow {
		b.x.logger().Info().Str("by", r.byKind).Str("name", r.by).Msg("shadow: would have refused the message")
	}
	return shadow
}

// record puts refusal r of message m on the message's audit event (opened
// for it whatever its method: a refused message is audited) and span; with
// wouldOnly, r only says what would have been refused, and the shadow
// metric counts it.
func (b *bodyInspection) record(m *mcpmsg.Message, r *refusal, wouldOnly bool) {
	x := b.x
	if b.event < 0 && r.denied {
		name, _ := messageTarget(m)
		b.event = x.trail.open(m, name)
	}
	x.trail.refused(b.event, r, wouldOnly, audit.PhaseRequest)
	if wouldOnly {
		x.obs.Shadowed(r.byKind, r.by, string(audit.DecisionWouldDeny))
	}
}

// changes reports whether a check may change the request: under
// extproc.shadow it may not, and the change is said as would_modify.
func (b *bodyInspection) changes(byKind, by string) bool {
	x := b.x
	shadow := x.shadow()
	x.trail.changed(b.event, byKind, by, shadow, audit.PhaseRequest)
	if shadow {
		x.obs.Shadowed(byKind, by, string(audit.DecisionWouldModify))
	}
	return !shadow
}

// modified reports whether the checks changed the request.
func (b *bodyInspection) modified() bool {
	return b.replaced != nil || b.headers != nil || b.remove != nil || b.delegated
}

// setHeader sets header k on the upstream request.
func (b *bodyInspection) setHeader(k, v string) {
	if b.headers == nil {
		b.headers = make(map[string]string)
	}
	b.headers[k] = v
}

// decide records the decision about the body: the first refused message,
// else the first request (or notification), modified when a check changed
// the request.
func (b *bodyInspection) decide() {
	x := b.x
	if len(b.refusals) > 0 {
		r := b.refusals[0]
		m := &b.msgs.Messages[r.index]
		name, _ := messageTarget(m)
		x.decision.set(m.Method, name, x.caller.id, decisionBlocked, r.by, r.byKind, r.violation)
		return
	}
	for i := range b.msgs.Messages {
		m := &b.msgs.Messages[i]
		if m.Kind != mcpmsg.KindRequest && m.Kind != mcpmsg.KindNotification {
			continue
		}
		outcome := decisionAllowed
		if b.modified() {
			outcome = decisionModified
		}
		name, _ := messageTarget(m)
		x.decision.set(m.Method, name, x.caller.id, outcome, "", "", "")
		return
	}
}

// forward lets the request go on: as is when nothing changed, else with
// the rewritten messages, the headers plugins set, and without
// content-encoding when the body was decoded.
func (b *bodyInspection) forward(body []byte, decoded bool) *extprocv3.ProcessingResponse {
	if b.replaced == nil && b.headers == nil && b.remove == nil && !decoded {
		return b.x.canned.requestBodyAsIs
	}
	if b.replaced != nil {
		body = mcpmsg.Join(b.msgs, b.replaced)
	}
	resp := bodyReply(false, body, true)
	cr := resp.GetRequestBody().GetResponse()
	if decoded {
		cr.HeaderMutation.RemoveHeaders = append(cr.HeaderMutation.RemoveHeaders, "content-encoding")
	}
	cr.HeaderMutation.RemoveHeaders = append(cr.HeaderMutation.RemoveHeaders, b.remove...)
	for k, v := range b.headers {
		cr.HeaderMutation.SetHeaders = append(cr.HeaderMutation.SetHeaders, header(k, v))
	}
	return resp
}

// readRequestBody applies the inspection limit and decodes a
// content-encoded body. A body the sidecar cannot read must not reach the
// server uninspected: it is decoded, inspected, and forwarded decoded
// (content-encoding removed), so the server reads exactly what the plugins
// saw. refused is the reply when the body cannot be inspected.
func (x *exchange) readRequestBody(body []byte) (out []byte, decoded bool, refused *extprocv3.ProcessingResponse) {
	max := x.snap.Settings.MaxBodyBytes
	if max > 0 && int64(len(body)) > max {
		x.logger().Warn().Int("bytes", len(body)).Int64("limit", max).Msg("refused: request body over the inspection limit")
		return nil, false, x.refuseBody(http.StatusRequestEntityTooLarge, "too_large",
			fmt.Sprintf("request body of %d bytes exceeds the inspection limit of %d bytes", len(body), max))
	}
	if enc := x.req.encoding; enc != "" {
		limit := decodedLimit(x.snap)
		dec, err := contentcoding.Decode(enc, body, limit)
		switch {
		case errors.Is(err, contentcoding.ErrTooLarge):
			x.logger().Warn().Str("content_encoding", logsafe.Cap(enc, logsafe.DefaultCap)).Int64("limit", limit).Msg("refused: decoded request body over the inspection limit")
			return nil, false, x.refuseBody(http.StatusRequestEntityTooLarge, "too_large",
				fmt.Sprintf("decoded request body exceeds the inspection limit of %d bytes", limit))
		case err != nil:
			x.logger().Warn().Str("error", logsafe.Cap(err.Error(), logsafe.DefaultCap)).Msg("refused: request body cannot be decoded")
			return nil, false, x.refuseBody(http.StatusUnsupportedMediaType, "unsupported_encoding",
				"request body cannot be inspected: "+err.Error())
		}
		body, decoded = dec, true
	}
	x.obs.BodyInspected("request", len(body))
	if x.req.logHeaders != nil {
		x.logger().Debug().Strs("headers", x.req.logHeaders).Str("body", logsafe.Cap(string(body), maxLoggedBody)).Msg("request body (--log-bodies)")
	}
	return body, decoded, nil
}

// decodedLimit caps a content-encoded body once decoded, request or
// answer: max_body_bytes, or 1 MiB when that is unlimited.
func decodedLimit(snap *Snapshot) int64 {
	if max := snap.Settings.MaxBodyBytes; max > 0 {
		return max
	}
	return 1 << 20
}

// maxLoggedBody bounds the body logged with --log-bodies, so the line stays
// well under logsafe.MaxLine with its headers.
const maxLoggedBody = 8 << 10

// refuseBody answers a request whose body cannot be inspected with an
// id-less JSON-RPC invalid-request error.
func (x *exchange) refuseBody(status int, reason, message string) *extprocv3.ProcessingResponse {
	x.obs.Immediate(reason)
	return jsonRPCReply(status, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInvalidRequest, message, nil), false, nil)
}

// invalidRequest answers a body that is not valid JSON-RPC.
func (x *exchange) invalidRequest(err error) *extprocv3.ProcessingResponse {
	code, reason := mcpmsg.CodeParseError, err.Error()
	var id []byte
	var e *mcpmsg.Error
	if errors.As(err, &e) {
		code, reason, id = e.Code, e.Message, e.ID
	}
	x.obs.Immediate("invalid_request")
	x.logger().Info().Str("reason", logsafe.Cap(reason, logsafe.DefaultCap)).Msg("refused: invalid JSON-RPC body")
	return jsonRPCReply(http.StatusBadRequest, mcpmsg.ErrorResponse(id, code, reason, nil), false, nil)
}

// The standard headers of MCP 2026-07-28 (docs/mcp-result-paths.md §4):
// Mcp-Method and Mcp-Name repeat the body's method and target, and each
// Mcp-Param-<H> repeats a tool argument. A server that routes or authorizes
// on them must see what the body says, before and after the plugins
// (mirrorHeaders, below, keeps them true after a rewrite).

// checkStandardHeaders refuses a single-message body whose Mcp-Method or
// Mcp-Name disagree with it (or lack one its declared protocol version
// requires), as a conforming server would: HTTP 400 and JSON-RPC -32020
// with the request's id. It defends servers that do not check.
func (b *bodyInspection) checkStandardHeaders() *extprocv3.ProcessingResponse {
	x := b.x
	msgs := b.msgs
	if msgs.Batch || len(msgs.Messages) != 1 || len(x.req.standard()) == 0 {
		return nil
	}
	m := &msgs.Messages[0]
	if m.Kind != mcpmsg.KindRequest && m.Kind != mcpmsg.KindNotification {
		return nil
	}
	name := m.Name
	if m.Method == "resources/read" {
		name = m.URI
	}
	// Check returns nil or a *MismatchError (no errors.As: the request
	// path allocates nothing it does not use).
	mm, ok := mcpheaders.Check(x.req.std.all, m.Method, name).(*mcpheaders.MismatchError)
	if !ok {
		return nil
	}
	x.obs.Immediate("header_mismatch")
	x.logger().Info().Str("header", mm.Header).Str("method", m.Method).Msg("refused: standard header disagrees with the body")
	return jsonRPCReply(http.StatusBadRequest, mcpmsg.ErrorResponse(m.ID, mcpheaders.CodeHeaderMismatch, mm.Error(), nil), false, nil)
}

// checkDeclaredMethod refuses, at the request headers, a request whose
// trusted Mcp-Method is not the method Envoy's MCP filter read from its
// body: HTTP 400 and JSON-RPC -32020, as a conforming server would. It
// matters where the body is not read on the header's word (no hook for
// the declared method): a tools/call declared as a ping must not pass
// because the server is trusted to notice. Without Envoy's MCP filter the
// sidecar cannot tell before the body; trust_mcp_method_header: false has
// every body read and checked (checkStandardHeaders).
func (x *exchange) checkDeclaredMethod() *extprocv3.ProcessingResponse {
	envoyMethod := x.req.envoyMethod
	if envoyMethod == "" {
		return nil
	}
	method, decided := x.req.declaredMethod(x.snap.Settings)
	if !decided || method == envoyMethod {
		return nil
	}
	x.obs.Immediate("header_mismatch")
	x.logger().Info().Str("header", "mcp-method").Str("envoy_method", envoyMethod).Msg("refused: Mcp-Method disagrees with the body Envoy's MCP filter read")
	return jsonRPCReply(http.StatusBadRequest, mcpmsg.ErrorResponse(nil, mcpheaders.CodeHeaderMismatch,
		"header mismatch: Mcp-Method header value does not match the body's method", nil), false, nil)
}

// checkMCPFilterMethod refuses a body that is not one message of the
// method Envoy's MCP filter read: HTTP 400 and JSON-RPC -32600 (with the
// request's id when there is one). Its answer may have been planned
// unread on Envoy's word (duplicate keys read two ways, a method past the
// filter's max_request_body_size).
func (b *bodyInspection) checkMCPFilterMethod() *extprocv3.ProcessingResponse {
	x := b.x
	msgs := b.msgs
	envoyMethod := x.req.envoyMethod
	if envoyMethod == "" {
		return nil
	}
	var id []byte
	if !msgs.Batch && len(msgs.Messages) == 1 {
		m := &msgs.Messages[0]
		if m.Method == envoyMethod {
			return nil
		}
		id = m.ID
	}
	x.obs.Immediate("mcp_filter_mismatch")
	x.logger().Info().Str("envoy_method", envoyMethod).Msg("refused: the body is not the request Envoy's MCP filter read")
	return jsonRPCReply(http.StatusBadRequest, mcpmsg.ErrorResponse(id, mcpmsg.CodeInvalidRequest,
		"the request's method is not the one Envoy's MCP filter read from it (duplicate or late keys?)", nil), false, nil)
}

// refuse answers the request with the refusals. A single message gets its
// error. In a batch, nothing is forwarded: the refused elements get their
// errors and every other request of the batch gets an error saying it was
// not executed because another element was refused — the batch is all or
// nothing, so the client never sees a partial execution it did not ask for.
func (x *exchange) refuse(msgs *mcpmsg.Body, refusals []refusal) *extprocv3.ProcessingResponse {
	first := refusals[0]
	x.obs.Immediate(first.reason)
	if !msgs.Batch {
		if first.id == nil {
			// A notification cannot carry a JSON-RPC error (docs/extproc-contract.md §6).
			return jsonRPCReply(http.StatusForbidden, first.errorResponse(), first.denied, first.headers)
		}
		return jsonRPCReply(first.status, first.errorResponse(), first.denied, first.headers)
	}
	byIndex := make(map[int]refusal, len(refusals))
	for _, r := range refusals {
		byIndex[r.index] = r
	}
	var elems [][]byte
	for i, m := range msgs.Messages {
		if r, ok := byIndex[i]; ok {
			if r.id != nil {
				elems = append(elems, r.errorResponse())
			}
			continue
		}
		if m.Kind == mcpmsg.KindRequest {
			elems = append(elems, mcpmsg.ErrorResponse(m.ID, -32000,
				"not executed: another request in this batch was refused", map[string]any{"refused_id": json.RawMessage(refusalID(first))}))
		}
	}
	if len(elems) == 0 {
		return jsonRPCReply(http.StatusForbidden, first.errorResponse(), first.denied, first.headers)
	}
	return jsonRPCReply(http.StatusOK, joinArray(elems), first.denied, nil)
}

func refusalID(r refusal) []byte {
	if r.id == nil {
		return []byte("null")
	}
	return r.id
}

// refuseAtBody answers the body of a request http_pre_request refused:
// each request of it gets the JSON-RPC error with its id.
func (x *exchange) refuseAtBody(body []byte) *extprocv3.ProcessingResponse {
	r := *x.http.refusal
	msgs, err := mcpmsg.Parse(body)
	if err != nil || len(msgs.Messages) == 0 {
		return x.refuseAtHeaders(r)
	}
	refusals := make([]refusal, 0, len(msgs.Messages))
	for i := range msgs.Messages {
		ri := r
		ri.index, ri.id = i, msgs.Messages[i].ID
		refusals = append(refusals, ri)
	}
	return x.refuse(msgs, refusals)
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

// A hook family's pre hook runs on a request of its route (hookfamily)
// when a plugin's conditions select the target; its post hook on the
// result (answer.go). Conditions come first: a message no plugin selects
// costs no payload work and no response inspection.

// preHook runs the pre hook of message i, and tells the results what its
// answer needs (results.expect).
func (b *bodyInspection) preHook(i int, m *mcpmsg.Message) (refusal, bool) {
	route, ok := hookfamily.ByMethod(m.Method)
	if !ok {
		return refusal{}, false
	}
	x := b.x
	f := route.Family
	name, known := x.results.targetOf(route, m)
	target := hookfamily.Target{Family: f, Name: name}
	runPre := route.Pre && x.snap.Hooks.AppliesTo(f.Pre, &x.req.global, target)
	a := x.results.wants(route, m, target, known)
	if !runPre && a == nil {
		return refusal{}, false
	}
	x.ensureContext()
	rc := x.requestContext()
	if a != nil {
		a.rc, a.event = rc, b.event
		x.results.await(m.ID, a)
	}
	if !runPre {
		return refusal{}, false
	}
	payload, err := b.prePayload(f, target.Name, m.Arguments)
	if err != nil {
		return refusal{index: i, id: m.ID, code: mcpmsg.CodeInvalidParams, message: err.Error(), status: http.StatusBadRequest, reason: "invalid_request"}, true
	}
	out := x.runHook(b.event, f.Pre, payload, rc, target)
	if r, blocked := x.refusalOf(out, i, m.ID, f.Pre); blocked {
		return r, true
	}
	if out.Modified && b.changes(byPlugin, "") {
		return b.rewrite(i, m, route, out.Payload)
	}
	return refusal{}, false
}

// prePayload encodes the pre hook payload. The arguments are embedded as the
// raw bytes the client sent (mcpmsg.Parse validated them): no decode, no
// re-encode. Families that carry headers get the forwarded ones.
func (b *bodyInspection) prePayload(f *hookfamily.Family, target string, args []byte) (json.RawMessage, error) {
	var h []byte
	if fwd := b.x.req.forwarded; f.HeadersKey != "" && len(fwd) > 0 {
		var err error
		if h, err = json.Marshal(fwd); err != nil {
			return nil, fmt.Errorf("encode %s headers: %w", f.Pre, err)
		}
	}
	return f.PrePayload(target, args, h)
}

// rewrite applies a modified pre hook payload to the message: the new
// target and arguments go into params, every other key is kept. Headers a
// plugin added or changed are set on the upstream request.
func (b *bodyInspection) rewrite(i int, m *mcpmsg.Message, route *hookfamily.Route, payload json.RawMessage) (refusal, bool) {
	x := b.x
	edit, err := route.EditOf(payload)
	var msg []byte
	if err == nil {
		msg, err = mcpmsg.ReplaceParams(*m, edit.Params)
	}
	if err != nil {
		return refusal{index: i, id: m.ID, code: mcpmsg.CodeInternalError,
			message: "plugin returned an unusable payload: " + err.Error(), status: http.StatusOK, reason: "plugin_error"}, true
	}
	if b.replaced == nil {
		b.replaced = make(map[int][]byte)
	}
	b.replaced[i] = msg
	for k, v := range edit.Headers {
		k = strings.ToLower(k)
		if x.req.forwarded[k] == v || !hookfamily.MaySetHeader(route.Family.Pre, k, v, x.req.sent(k), x.snap.Settings.AllowCredentialHeaders) {
			continue
		}
		b.setHeader(k, v)
	}
	if r, refused := b.mirrorHeaders(i, m, route, &edit); refused {
		return r, true
	}
	x.logger().Debug().Str("hook", string(route.Family.Pre)).Str("target", logsafe.Cap(targetName(route, m), logsafe.DefaultCap)).Msg("request rewritten by plugins")
	return refusal{}, false
}

// mirrorHeaders makes Mcp-Name and the Mcp-Param-* headers of a request a
// pre hook rewrote carry the new values. A header whose value cannot be
// rebuilt for sure is removed, or the request refused
// (uncertain_mirrored_headers: refuse): a header never keeps what a plugin
// removed from the body. The mirrors win over headers a plugin set.
func (b *bodyInspection) mirrorHeaders(i int, m *mcpmsg.Message, route *hookfamily.Route, edit *hookfamily.PreEdit) (refusal, bool) {
	x := b.x
	std := x.req.standard()
	if len(std) == 0 {
		return refusal{}, false
	}
	newArgs := m.Arguments
	if a, ok := edit.Params[route.ArgsParam]; ok && route.ArgsParam != "" {
		newArgs = a
	}
	plan := mcpheaders.Mirror(std, mcpheaders.Rewrite{
		Method: m.Method, OrigName: targetName(route, m), NewName: edit.Name,
		OrigArgs: m.Arguments, NewArgs: newArgs,
	})
	if len(plan.Uncertain) > 0 && x.snap.Settings.RefusesUncertainMirror() {
		x.logger().Info().Strs("headers", plan.Uncertain).Msg("refused: a rewritten argument's header mirror cannot be rebuilt")
		return refusal{index: i, id: m.ID, code: mcpmsg.CodeInternalError, status: http.StatusOK, reason: "header_mirror",
			message: "a plugin rewrote an argument mirrored in " + strings.Join(plan.Uncertain, ", ") + ", which cannot be rebuilt; request refused"}, true
	}
	for _, h := range plan.Set {
		b.setHeader(h.Name, h.Value)
	}
	for _, name := range plan.Remove {
		delete(b.headers, name)
		b.remove = append(b.remove, name)
	}
	return refusal{}, false
}

// messageTarget returns what message m names as its target and its
// arguments, as rules (mcp.name, mcp.arguments), audit events and
// Envoy's metadata see them: the target and arguments of the method's
// route (hookfamily), none for a method whose request names none.
func messageTarget(m *mcpmsg.Message) (name string, args []byte) {
	r, ok := hookfamily.ByMethod(m.Method)
	if !ok || r.TargetParam == "" {
		return "", nil
	}
	if r.ArgsParam != "" {
		args = m.Arguments
	}
	return targetName(r, m), args
}

// targetName returns the target mcpmsg.Parse read from the route's
// TargetParam: params.uri lands in Message.URI, params.name in Message.Name.
func targetName(r *hookfamily.Route, m *mcpmsg.Message) string {
	if r.TargetParam == "uri" {
		return m.URI
	}
	return m.Name
}

// refusal is one message the sidecar answers itself instead of forwarding.
type refusal struct {
	index   int
	id      []byte
	code    int
	message string
	data    map[string]any
	status  int
	headers map[string]string
	reason  string // metrics label
	denied  bool   // caused by a plugin or a rule
	// by and byKind name who refused (replies.go); violation is the
	// violation's code.
	by, byKind, violation string
}

func (r refusal) errorResponse() []byte {
	var data any
	if r.data != nil {
		data = r.data
	}
	return mcpmsg.ErrorResponse(r.id, r.code, r.message, data)
}

// refusalOf turns a blocking outcome into a refusal.
func (x *exchange) refusalOf(out executor.Outcome, index int, id []byte, hook cpex.HookType) (refusal, bool) {
	switch {
	case out.Violation != nil:
		v := out.Violation
		r := refusal{index: index, id: id, code: -32000, status: http.StatusOK, reason: "blocked", denied: true,
			message: v.Reason + ": " + v.Description,
			data:    map[string]any{"plugin": v.PluginName, "code": v.Code, "details": v.Details},
			headers: v.HTTPHeaders,
			by:      v.PluginName, byKind: byPlugin, violation: v.Code,
		}
		if v.MCPErrorCode != nil {
			r.code = *v.MCPErrorCode
		}
		if v.HTTPStatusCode != nil && *v.HTTPStatusCode >= 200 && *v.HTTPStatusCode <= 599 {
			r.status = *v.HTTPStatusCode
		}
		if d := out.RetryDelay; d > 0 {
			r.data["retry_delay_ms"] = ceilDiv(d, time.Millisecond)
			r.headers = withRetryAfter(v.HTTPHeaders, d)
		}
		x.logger().Info().Str("hook", string(hook)).Str("plugin", v.PluginName).Str("code", v.Code).Str("reason", v.Reason).Msg("blocked by plugin")
		return r, true
	case out.Err != nil:
		e := out.Err
		// The executor logged the failure (warn, with on_error and duration).
		x.logger().Debug().Str("hook", string(hook)).Str("plugin", e.Plugin).Err(e.Cause).Bool("plugin_down", e.Down).Msg("refused: plugin failed (on_error: fail)")
		return refusal{index: index, id: id, code: mcpmsg.CodeInternalError, status: http.StatusOK, reason: "plugin_error", denied: true,
			message: fmt.Sprintf("plugin %s failed: %v", e.Plugin, e.Cause),
			data:    map[string]any{"plugin": e.Plugin},
			by:      e.Plugin, byKind: byPlugin,
		}, true
	}
	return refusal{}, false
}

// withRetryAfter returns headers with Retry-After set to d in whole
// seconds, rounded up (d is at most cpex.MaxRetryDelay, so at most 3600). A
// Retry-After the plugin set in its violation's http_headers is kept: the
// plugin said it exactly. headers is not changed.
func withRetryAfter(headers map[string]string, d time.Duration) map[string]string {
	for k := range headers {
		if strings.EqualFold(k, "retry-after") {
			return headers
		}
	}
	out := maps.Clone(headers)
	if out == nil {
		out = make(map[string]string, 1)
	}
	out["Retry-After"] = strconv.FormatInt(ceilDiv(d, time.Second), 10)
	return out
}

// ceilDiv returns d/unit rounded up, for d >= 0.
func ceilDiv(d, unit time.Duration) int64 { return int64((d + unit - 1) / unit) }

// refuseAtHeaders answers a request refused before its JSON-RPC id is
// known: the refusal's status (a 200 becomes 403 for a block, 500 for a
// failed plugin) and an id-less JSON-RPC error.
func (x *exchange) refuseAtHeaders(r refusal) *extprocv3.ProcessingResponse {
	status := r.status
	if status == http.StatusOK {
		status = http.StatusForbidden
		if r.reason == "plugin_error" {
			status = http.StatusInternalServerError
		}
	}
	x.obs.Immediate(r.reason)
	return jsonRPCReply(status, r.errorResponse(), r.denied, r.headers)
}
