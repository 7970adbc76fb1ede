package processor

import (
	"encoding/json"
	"net/http"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
)

// identity_resolve (cpex's token → subject hook) is an identity source
// like http_auth_resolve_user, by a plugin's presence: asked when no
// verified source and no http_auth_resolve_user plugin named the caller,
// and only when the request has a bearer token (raw_token is required).
// The subject it answers is the identity (id → user, and email when it is
// one; roles, teams); rejected:true, or a violation, is a 401 (or its
// reject_status) with WWW-Authenticate: Bearer. cpex 0.1.3 serves this
// hook correctly over MCP only (docs/identity.md).

// pluginIdentity runs the plugin identity sources in order:
// http_auth_resolve_user, then identity_resolve. It returns the identity,
// or nil when none named the caller, or the reply refusing the request.
func (st *stream) pluginIdentity(headers map[string]string, rc *executor.RequestContext, auth, resolve bool) (*identity.Identity, *extprocv3.ProcessingResponse) {
	if auth {
		if user, refused := st.resolveUser(headers, rc); user != nil || refused != nil {
			return user, refused
		}
	}
	if resolve {
		return st.identityResolve(headers, rc)
	}
	return nil, nil
}

// identityResolve runs identity_resolve with the caller's bearer token.
func (st *stream) identityResolve(headers map[string]string, rc *executor.RequestContext) (*identity.Identity, *extprocv3.ProcessingResponse) {
	scheme, token, _ := strings.Cut(headers["authorization"], " ")
	if token = strings.TrimSpace(token); !strings.EqualFold(scheme, "bearer") || token == "" {
		return nil, nil
	}
	payload, err := json.Marshal(cpex.IdentityResolvePayload{RawToken: token, Source: "bearer", Headers: headers,
		ClientHost: st.client.host, ClientPort: st.client.port})
	if err != nil {
		return nil, internalError(st, "identity_resolve payload: "+err.Error())
	}
	out := st.snap.Hooks.Run(st.ctx, cpex.IdentityResolve, payload, rc, executor.Target{})
	if r, blocked := st.refusalOf(out, 0, nil, cpex.IdentityResolve); blocked {
		return nil, st.refuseAtHeaders(authRefusal(out, r))
	}
	if !out.Modified {
		return nil, nil
	}
	var res cpex.IdentityResolution
	if err := json.Unmarshal(out.Payload, &res); err != nil || res.Subject == nil || strings.TrimSpace(res.Subject.ID) == "" {
		st.logger().Info().Msg("identity_resolve: no subject id; ignored")
		return nil, nil
	}
	s := res.Subject
	id := identity.Identity{Source: identity.SourcePlugin, User: s.ID, Roles: s.Roles, Teams: s.Teams}
	if strings.Contains(s.ID, "@") {
		id.Email = s.ID
	}
	return &id, nil
}

// authRefusal makes a refusal of an identity hook a 401 (or the
// violation's 4xx/5xx status) with a WWW-Authenticate challenge.
func authRefusal(out executor.Outcome, r refusal) refusal {
	if out.Violation != nil {
		r.status = http.StatusUnauthorized
		if c := out.Violation.HTTPStatusCode; c != nil && *c >= 400 && *c <= 599 {
			r.status = *c
		}
		r.headers = unauthorizedHeaders(r.headers)
	}
	return r
}
