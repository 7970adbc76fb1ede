package processor

import (
	"encoding/json"
	"net/http"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// http_auth_check_permission asks, for each MCP request of a body, whether
// the caller may do it, after the identity is resolved (the HTTP hooks at
// the request headers) and before the message's pre hook. The permission
// of each operation is ContextForge's name where it has one
// (hookfamily.Route.Permission; docs/identity.md has the table). A denial
// (granted:false from a plugin whose mode may block) refuses that request
// with HTTP 403 and a JSON-RPC error carrying its id, the plugin and the
// reason; in a batch, the batch.

// checkPermission runs http_auth_check_permission on one message; it
// returns the refusal when the permission is denied or a plugin failed
// under on_error fail.
func (b *bodyInspection) checkPermission(i int, m *mcpmsg.Message) (refusal, bool) {
	x := b.x
	if m.Kind != mcpmsg.KindRequest {
		return refusal{}, false
	}
	op, ok := hookfamily.Operation(m.Method)
	if !ok || op.Permission == "" {
		return refusal{}, false
	}
	var target hookfamily.Target
	if op.Hooked() {
		target.Family = op.Family
		target.Name, _ = x.results.targetOf(op, m)
	}
	if !x.snap.Hooks.AppliesTo(cpex.HTTPAuthCheckPermission, &x.req.global, target) {
		return refusal{}, false
	}
	x.ensureContext()
	payload, err := json.Marshal(b.permissionPayload(op))
	if err != nil {
		return refusal{index: i, id: m.ID, code: mcpmsg.CodeInternalError, status: http.StatusInternalServerError,
			reason: "internal", message: "http_auth_check_permission payload: " + err.Error()}, true
	}
	out := x.runHook(b.event, cpex.HTTPAuthCheckPermission, payload, x.requestContext(), target)
	return x.refusalOf(out, i, m.ID, cpex.HTTPAuthCheckPermission)
}

// permissionPayload describes the caller as the identity resolved it; an
// anonymous caller has an empty user_email.
func (b *bodyInspection) permissionPayload(op *hookfamily.Route) cpex.HTTPAuthCheckPermissionPayload {
	x := b.x
	g := &x.req.global
	p := cpex.HTTPAuthCheckPermissionPayload{Permission: op.Permission, ResourceType: op.ResourceType, ClientHost: x.http.client.host}
	if uc := g.UserContext; uc != nil {
		p.UserEmail, p.IsAdmin, p.TeamID, p.AuthMethod = uc.Email, uc.IsAdmin, uc.TeamID, uc.AuthMethod
		if p.UserEmail == "" {
			p.UserEmail = uc.UserID
		}
	} else if len(g.User) > 0 {
		var u string
		if json.Unmarshal(g.User, &u) == nil {
			p.UserEmail = u // a legacy user header
		}
	}
	if hv := findHeader(x.req.headers, "user-agent"); hv != nil {
		p.UserAgent = headerValue(hv)
	}
	return p
}
