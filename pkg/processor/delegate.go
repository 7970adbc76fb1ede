package processor

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// token_delegate runs on each tools/call of a body that a plugin's
// conditions select, after the call's tool_pre_invoke (as ContextForge's
// caller does), with the tool as the target and the caller's bearer token
// (the real one: plugins need it, logs never show it). Its answer replaces
// the caller's credential on the upstream request: the forwarded_headers
// are set (or, without them, Authorization: Bearer delegated_token), and
// every credential header of the caller they do not set is removed. A
// delegate that answers nothing still removes them: with a delegate
// selected for the tool, the caller's token never reaches the MCP server.
// A violation, or a failure under on_error fail, refuses the call with a
// JSON-RPC error. The headers of a request are one for the whole body, so
// a batch whose tool calls are delegated different credentials is refused.

// delegate runs token_delegate on message i when it is a tools/call the
// pre hook did not refuse.
func (st *stream) delegate(i int, m *mcpmsg.Message, ed *requestEdits) {
	if m.Kind != mcpmsg.KindRequest || m.Method != "tools/call" {
		return
	}
	if n := len(ed.refusals); n > 0 && ed.refusals[n-1].index == i {
		return
	}
	route, _ := hookfamily.ByMethod(m.Method)
	target := hookfamily.Target{Family: route.Family, Name: m.Name}
	if !st.snap.Hooks.AppliesTo(cpex.TokenDelegate, &st.global, target) {
		return
	}
	st.ensureContext()
	payload, err := json.Marshal(cpex.TokenDelegatePayload{TargetName: m.Name, TargetType: "tool", BearerToken: st.bearerToken()})
	if err != nil {
		ed.refusals = append(ed.refusals, refusal{index: i, id: m.ID, code: mcpmsg.CodeInternalError, status: http.StatusInternalServerError,
			reason: "internal", message: "token_delegate payload: " + err.Error()})
		return
	}
	out := st.snap.Hooks.Run(st.ctx, cpex.TokenDelegate, payload, st.requestContext(), target)
	if r, refused := st.refusalOf(out, i, m.ID, cpex.TokenDelegate); refused {
		ed.refusals = append(ed.refusals, r)
		return
	}
	var d cpex.Delegation
	if out.Modified {
		_ = json.Unmarshal(out.Payload, &d) // the executor checked its shape
	}
	if r, refused := st.applyDelegation(i, m, d, ed); refused {
		ed.refusals = append(ed.refusals, r)
	}
}

// applyDelegation puts the delegated credential into the request's header
// edits; it refuses a delegation that conflicts with another message's.
func (st *stream) applyDelegation(i int, m *mcpmsg.Message, d cpex.Delegation, ed *requestEdits) (refusal, bool) {
	set := map[string]string{}
	for k, v := range d.ForwardedHeaders {
		k = strings.ToLower(k)
		if !hookfamily.MaySetHeader(cpex.TokenDelegate, k, v, false, true) {
			st.logger().Info().Str("header", k).Msg("token_delegate: forwarded header not set (not a header plugins may set)")
			continue
		}
		set[k] = v
	}
	if len(d.ForwardedHeaders) == 0 && d.DelegatedToken != "" && hookfamily.MaySetHeader(cpex.TokenDelegate, "authorization", "Bearer "+d.DelegatedToken, false, true) {
		set["authorization"] = "Bearer " + d.DelegatedToken
	}
	for k, v := range set {
		if old, ok := ed.headers[k]; ok && old != v && ed.delegated {
			return refusal{index: i, id: m.ID, code: mcpmsg.CodeInvalidRequest, status: http.StatusBadRequest, reason: "invalid_request",
				message: "token_delegate: the tool calls of this batch need different credentials; send them in separate requests"}, true
		}
		if ed.headers == nil {
			ed.headers = make(map[string]string)
		}
		ed.headers[k] = v
	}
	for k := range config.CredentialHeaders() {
		if _, set := ed.headers[k]; !set && st.sentHeader(k) && !slices.Contains(ed.remove, k) {
			ed.remove = append(ed.remove, k)
		}
	}
	ed.delegated = true
	return refusal{}, false
}

// sentHeader reports whether the request has header k.
func (st *stream) sentHeader(k string) bool { return findHeader(st.headers, k) != nil }

// bearerToken returns the caller's bearer token ("" when there is none).
func (st *stream) bearerToken() string {
	if scheme, tok, ok := strings.Cut(headerValue(findHeader(st.headers, "authorization")), " "); ok && strings.EqualFold(scheme, "bearer") {
		return strings.TrimSpace(tok)
	}
	return ""
}

// minSecret is the shortest credential value redacted from error texts:
// replacing shorter strings would garble a message more than it hides.
const minSecret = 8

// credentialSecrets returns the caller's credentials in headers, which no
// plugin error text may show (executor.RequestContext.Secrets): each
// credential header's value, and each credential in it, since a header
// sent twice is joined (", ") and a cookie header holds several (";"):
// every part, its token after the scheme, and a cookie's value.
func credentialSecrets(headers map[string]string) []string {
	var out []string
	add := func(s string) {
		if s = strings.TrimSpace(s); len(s) >= minSecret && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for k := range config.CredentialHeaders() {
		v := headers[k]
		if len(v) < minSecret {
			continue
		}
		add(v)
		for part := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == ',' || r == ';' }) {
			add(part)
			if _, tok, ok := strings.Cut(strings.TrimSpace(part), " "); ok {
				add(tok)
			}
			if _, val, ok := strings.Cut(part, "="); ok {
				add(val)
			}
		}
	}
	return out
}
