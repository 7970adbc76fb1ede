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
// (docs/identity.md has the table). A denial (granted:false from a plugin
// whose mode may block) refuses that request with HTTP 403 and a JSON-RPC
// error carrying its id, the plugin and the reason; in a batch, the batch.

// permission is what an MCP operation asks for.
type permission struct {
	name, resourceType string
}

// permissionOf returns the permission an MCP method needs, and false for
// methods that are not checked (initialize, ping, notifications, tasks/*,
// completion, logging).
func permissionOf(method string) (permission, bool) {
	switch method {
	case "tools/call":
		return permission{"tools.execute", "tool"}, true
	case "tools/list":
		return permission{"tools.read", "tool"}, true
	case "prompts/get", "prompts/list":
		return permission{"prompts.read", "prompt"}, true
	case "resources/read", "resources/list", "resources/templates/list", "resources/subscribe", "resources/unsubscribe":
		return permission{"resources.read", "resource"}, true
	}
	return permission{}, false
}

// checksPermission reports whether a request of this method needs its body
// read for http_auth_check_permission or token_delegate.
func (st *stream) checksPermission(method string) bool {
	if method == "tools/call" && st.snap.Hooks.Applies(cpex.TokenDelegate) {
		return true
	}
	_, ok := permissionOf(method)
	return ok && st.snap.Hooks.Applies(cpex.HTTPAuthCheckPermission)
}

// checkPermission runs http_auth_check_permission on one message; it
// returns the refusal when the permission is denied or a plugin failed
// under on_error fail.
func (st *stream) checkPermission(i int, m *mcpmsg.Message) (refusal, bool) {
	if m.Kind != mcpmsg.KindRequest {
		return refusal{}, false
	}
	perm, ok := permissionOf(m.Method)
	if !ok {
		return refusal{}, false
	}
	var target hookfamily.Target
	if route, ok := hookfamily.ByMethod(m.Method); ok {
		target.Family = route.Family
		target.Name, _ = st.targetOf(route, m)
	}
	if !st.snap.Hooks.AppliesTo(cpex.HTTPAuthCheckPermission, &st.global, target) {
		return refusal{}, false
	}
	st.ensureContext()
	payload, err := json.Marshal(st.permissionPayload(perm))
	if err != nil {
		return refusal{index: i, id: m.ID, code: mcpmsg.CodeInternalError, status: http.StatusInternalServerError,
			reason: "internal", message: "http_auth_check_permission payload: " + err.Error()}, true
	}
	out := st.snap.Hooks.Run(st.ctx, cpex.HTTPAuthCheckPermission, payload, st.requestContext(), target)
	return st.refusalOf(out, i, m.ID, cpex.HTTPAuthCheckPermission)
}

// permissionPayload describes the caller as the identity resolved it; an
// anonymous caller has an empty user_email.
func (st *stream) permissionPayload(perm permission) cpex.HTTPAuthCheckPermissionPayload {
	p := cpex.HTTPAuthCheckPermissionPayload{Permission: perm.name, ResourceType: perm.resourceType, ClientHost: st.client.host}
	if uc := st.global.UserContext; uc != nil {
		p.UserEmail, p.IsAdmin, p.TeamID, p.AuthMethod = uc.Email, uc.IsAdmin, uc.TeamID, uc.AuthMethod
		if p.UserEmail == "" {
			p.UserEmail = uc.UserID
		}
	} else if len(st.global.User) > 0 {
		var u string
		if json.Unmarshal(st.global.User, &u) == nil {
			p.UserEmail = u // a legacy user header
		}
	}
	if hv := findHeader(st.headers, "user-agent"); hv != nil {
		p.UserAgent = headerValue(hv)
	}
	return p
}
