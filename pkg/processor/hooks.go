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
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpheaders"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

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
	// by and byKind name who refused (decision.go); violation is the
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
