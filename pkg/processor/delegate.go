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

// delegate runs token_delegate on message i when its method is delegated
// (hookfamily.Route.Delegated: tools/call).
func (b *bodyInspection) delegate(i int, m *mcpmsg.Message) (refusal, bool) {
	route, ok := hookfamily.ByMethod(m.Method)
	if m.Kind != mcpmsg.KindRequest || !ok || !route.Delegated {
		return refusal{}, false
	}
	x := b.x
	target := hookfamily.Target{Family: route.Family, Name: targetName(route, m)}
	if !x.snap.Hooks.AppliesTo(cpex.TokenDelegate, &x.req.global, target) {
		return refusal{}, false
	}
	x.ensureContext()
	payload, err := json.Marshal(cpex.TokenDelegatePayload{TargetName: target.Name, TargetType: route.Family.Name,
		TargetAudience: x.req.resource(), RequiredPermissions: []string{route.Permission}, BearerToken: x.req.bearerToken()})
	if err != nil {
		return refusal{index: i, id: m.ID, code: mcpmsg.CodeInternalError, status: http.StatusInternalServerError,
			reason: "internal", message: "token_delegate payload: " + err.Error()}, true
	}
	out := x.runHook(b.event, cpex.TokenDelegate, payload, x.requestContext(), target)
	if r, refused := x.refusalOf(out, i, m.ID, cpex.TokenDelegate); refused {
		return r, true
	}
	var d cpex.Delegation
	if out.Modified {
		_ = json.Unmarshal(out.Payload, &d) // the executor checked its shape
	}
	if !b.changes(byPlugin, "") {
		return refusal{}, false // shadow: the caller's credential goes on
	}
	return b.applyDelegation(i, m, d)
}

// applyDelegation puts the delegated credential into the request's header
// edits; it refuses a delegation that conflicts with another message's.
func (b *bodyInspection) applyDelegation(i int, m *mcpmsg.Message, d cpex.Delegation) (refusal, bool) {
	set := map[string]string{}
	for k, v := range d.ForwardedHeaders {
		k = strings.ToLower(k)
		if !hookfamily.MaySetHeader(cpex.TokenDelegate, k, v, false, true) {
			b.x.logger().Info().Str("header", k).Msg("token_delegate: forwarded header not set (not a header plugins may set)")
			continue
		}
		set[k] = v
	}
	if len(d.ForwardedHeaders) == 0 && d.DelegatedToken != "" && hookfamily.MaySetHeader(cpex.TokenDelegate, "authorization", "Bearer "+d.DelegatedToken, false, true) {
		set["authorization"] = "Bearer " + d.DelegatedToken
	}
	for k, v := range set {
		if old, ok := b.headers[k]; ok && old != v && b.delegated {
			return refusal{index: i, id: m.ID, code: mcpmsg.CodeInvalidRequest, status: http.StatusBadRequest, reason: "invalid_request",
				message: "token_delegate: the tool calls of this batch need different credentials; send them in separate requests"}, true
		}
		b.setHeader(k, v)
	}
	for k := range config.CredentialHeaders() {
		if _, set := b.headers[k]; !set && b.x.req.sent(k) && !slices.Contains(b.remove, k) {
			b.remove = append(b.remove, k)
		}
	}
	b.delegated = true
	return refusal{}, false
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
