package processor

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// requestEdits collects what the pre hooks of one body decided.
type requestEdits struct {
	replaced map[int][]byte    // rewritten messages, by index
	headers  map[string]string // headers to set on the upstream request
	remove   []string          // headers to remove from it
	refusals []refusal
	// delegated: token_delegate set the upstream credential (delegate.go).
	delegated bool
}

// preHook runs the pre hook of one message, when its method belongs to a
// hook family and a plugin's conditions select it, and registers the
// message for its post hook. Conditions come first: a message no plugin
// selects costs no payload work and no response inspection.
func (st *stream) preHook(i int, m *mcpmsg.Message, ed *requestEdits) {
	if m.Kind != mcpmsg.KindRequest && m.Kind != mcpmsg.KindNotification {
		return
	}
	route, ok := hookfamily.ByMethod(m.Method)
	if !ok {
		return
	}
	f := route.Family
	name, known := st.targetOf(route, m)
	target := hookfamily.Target{Family: f, Name: name}
	runPre := route.Pre && st.snap.Hooks.AppliesTo(f.Pre, &st.global, target)
	p := st.postWanted(route, m, target, known)
	if !runPre && p == nil {
		return
	}
	st.ensureContext()
	rc := st.requestContext()
	if p != nil {
		p.rc = rc
		st.await(m.ID, p)
	}
	if !runPre {
		return
	}
	payload, err := st.prePayload(f, target.Name, m.Arguments)
	if err != nil {
		ed.refusals = append(ed.refusals, refusal{index: i, id: m.ID, code: mcpmsg.CodeInvalidParams, message: err.Error(), status: http.StatusBadRequest, reason: "invalid_request"})
		return
	}
	out := st.snap.Hooks.Run(st.ctx, f.Pre, payload, rc, target)
	if r, blocked := st.refusalOf(out, i, m.ID, f.Pre); blocked {
		ed.refusals = append(ed.refusals, r)
		return
	}
	if out.Modified {
		st.rewriteRequest(i, m, route, out.Payload, ed)
	}
}

// await makes the answer to id pending as p. The response is then read,
// so other streams' results on it are looked up too. Pending answers are
// keyed by the id's value (mcpmsg.CanonicalID): Parse accepted the
// request, so it has one.
func (st *stream) await(id []byte, p *pendingCall) {
	if st.pending == nil {
		st.pending = make(map[string]*pendingCall)
	}
	st.pending[string(idKey(id))] = p
	st.foreign = true
}

// idKey is the form of a JSON-RPC id that requests and answers are
// matched under: its value, as mcpmsg.CanonicalID writes it. An id without
// one (an answer's 7.0: no request Parse accepted has it) is returned as
// nil, which is the key of no request.
func idKey(id []byte) []byte {
	canon, err := mcpmsg.CanonicalID(id)
	if err != nil {
		return nil
	}
	return canon
}

// postWanted returns the pending entry of a request whose answer must be
// read, or nil: the post hook applies to its target; or it is a tools/call
// that may create a task (its task id is learned from the answer); or it
// reads a task of unknown origin (the unattributed_responses policy
// applies to a result in the answer).
func (st *stream) postWanted(route *hookfamily.Route, m *mcpmsg.Message, target hookfamily.Target, known bool) *pendingCall {
	if !route.Post || m.ID == nil {
		return nil
	}
	post := route.Family.Post
	switch {
	case !known:
		if !st.snap.Hooks.Applies(post) || !st.snap.Settings.RefusesUnattributed() {
			return nil
		}
		return &pendingCall{route: route, target: target, unknown: true}
	case st.snap.Hooks.AppliesTo(post, &st.global, target):
		return &pendingCall{route: route, target: target, hook: true}
	case mayCreateTask(m) && st.snap.Hooks.Applies(post):
		return &pendingCall{route: route, target: target}
	}
	return nil
}

// ownIDs notes the ids of the body's requests: on a stream whose response
// is read, an answer to one of them that is not pending (answered already,
// or no post hook wants it) passes without a lookup.
func (st *stream) ownIDs(msgs *mcpmsg.Body) {
	if !st.foreign {
		return
	}
	for i := range msgs.Messages {
		m := &msgs.Messages[i]
		if m.Kind != mcpmsg.KindRequest {
			continue
		}
		if st.own == nil {
			st.own = make(map[string]struct{}, len(msgs.Messages))
		}
		st.own[string(idKey(m.ID))] = struct{}{}
	}
}

// targetName returns the target mcpmsg.Parse read from the route's
// TargetParam: params.uri lands in Message.URI, params.name in Message.Name.
func targetName(r *hookfamily.Route, m *mcpmsg.Message) string {
	if r.TargetParam == "uri" {
		return m.URI
	}
	return m.Name
}

// prePayload encodes the pre hook payload. The arguments are embedded as the
// raw bytes the client sent (mcpmsg.Parse validated them): no decode, no
// re-encode. Families that carry headers get the forwarded ones.
func (st *stream) prePayload(f *hookfamily.Family, target string, args []byte) (json.RawMessage, error) {
	var h []byte
	if f.HeadersKey != "" && len(st.forwarded) > 0 {
		var err error
		if h, err = json.Marshal(st.forwarded); err != nil {
			return nil, fmt.Errorf("encode %s headers: %w", f.Pre, err)
		}
	}
	return f.PrePayload(target, args, h)
}

// rewriteRequest applies a modified pre hook payload to the message: the new
// target and arguments go into params, every other key is kept. Headers a
// plugin added or changed are set on the upstream request.
func (st *stream) rewriteRequest(i int, m *mcpmsg.Message, route *hookfamily.Route, payload json.RawMessage, ed *requestEdits) {
	edit, err := route.EditOf(payload)
	var msg []byte
	if err == nil {
		msg, err = mcpmsg.ReplaceParams(*m, edit.Params)
	}
	if err != nil {
		ed.refusals = append(ed.refusals, refusal{index: i, id: m.ID, code: mcpmsg.CodeInternalError,
			message: "plugin returned an unusable payload: " + err.Error(), status: http.StatusOK, reason: "plugin_error"})
		return
	}
	if ed.replaced == nil {
		ed.replaced = make(map[int][]byte)
	}
	ed.replaced[i] = msg
	for k, v := range edit.Headers {
		k = strings.ToLower(k)
		if st.forwarded[k] == v || !hookfamily.MaySetHeader(route.Family.Pre, k, v, findHeader(st.headers, k) != nil, st.snap.Settings.AllowCredentialHeaders) {
			continue
		}
		if ed.headers == nil {
			ed.headers = make(map[string]string)
		}
		ed.headers[k] = v
	}
	if r, refused := st.mirrorHeaders(i, m, route, &edit, ed); refused {
		ed.refusals = append(ed.refusals, r)
		return
	}
	st.logger().Debug().Str("hook", string(route.Family.Pre)).Str("target", logsafe.Cap(targetName(route, m), logsafe.DefaultCap)).Msg("request rewritten by plugins")
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
	// by and byKind name who refused (decision.go); code is the
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
func (st *stream) refusalOf(out executor.Outcome, index int, id []byte, hook cpex.HookType) (refusal, bool) {
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
		st.logger().Info().Str("hook", string(hook)).Str("plugin", v.PluginName).Str("code", v.Code).Str("reason", v.Reason).Msg("blocked by plugin")
		return r, true
	case out.Err != nil:
		e := out.Err
		// The executor logged the failure (warn, with on_error and duration).
		st.logger().Debug().Str("hook", string(hook)).Str("plugin", e.Plugin).Err(e.Cause).Bool("plugin_down", e.Down).Msg("refused: plugin failed (on_error: fail)")
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

// refuse answers the request with the refusals. A single message gets its
// error. In a batch, nothing is forwarded: the refused elements get their
// errors and every other request of the batch gets an error saying it was
// not executed because another element was refused — the batch is all or
// nothing, so the client never sees a partial execution it did not ask for.
func (st *stream) refuse(msgs *mcpmsg.Body, refusals []refusal) *extprocv3.ProcessingResponse {
	first := refusals[0]
	st.obs.Immediate(first.reason)
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
