package processor

import (
	"encoding/json"
	"net/http"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// The HTTP-level hooks run at the request headers of every request to an
// MCP path, before anything else, and only when a plugin has them:
//
//   - http_pre_request sees the path (without query), the method and the
//     request headers (multi-valued ones joined, pseudo-headers left out,
//     credentials included: plugins get the real values, logs never do).
//     The headers it returns are set on the request Envoy forwards, except
//     ":"-headers, host, x-envoy*, framing and MCP standard headers, and
//     credential headers the client sent (unless allow_credential_headers).
//     A violation refuses the request with its http_status_code (default
//     403) and headers; enforced, unlike ContextForge, because nothing
//     stands behind the sidecar. A POST with a body is refused at its body,
//     so the JSON-RPC error carries the request's id.
//   - http_auth_resolve_user runs when no verified source (JWT metadata,
//     mTLS peer) named the caller. The user it returns is the identity and
//     wins over any header; a violation, or a user with is_active false, is
//     a 401 with WWW-Authenticate: Bearer. No user: identity_resolve, if a
//     plugin has it (identityresolve.go), then the other sources apply.

// beforeMCP runs the HTTP hooks and resolves the identity; it returns the
// reply when the request is refused now.
func (st *stream) beforeMCP(h *extprocv3.HttpHeaders, method, path string) *extprocv3.ProcessingResponse {
	hooks := st.snap.Hooks
	pre, auth := hooks.Applies(cpex.HTTPPreRequest), hooks.Applies(cpex.HTTPAuthResolveUser)
	post, resolve := hooks.Applies(cpex.HTTPPostRequest), hooks.Applies(cpex.IdentityResolve)
	if pre || auth || post || resolve || hooks.Applies(cpex.HTTPAuthCheckPermission) {
		st.readClient() // client.go
	}
	if !pre && !auth && !post && !resolve {
		if st.snap.Identity != nil {
			st.resolveIdentity(h)
		}
		return nil
	}
	st.ensureContext()
	headers := requestHeaderMap(h.GetHeaders())
	rc := executor.NewRequestContext(st.global)
	rc.Secrets = credentialSecrets(headers)
	if pre {
		if refused := st.preRequest(h, method, path, headers, rc); refused != nil {
			return refused
		}
		if st.httpRefusal != nil {
			return nil // refused at the body (requestBody)
		}
	}
	if post {
		p, _, _ := strings.Cut(path, "?")
		st.httpReq = &httpRequest{method: method, path: p, headers: headers} // httppost.go
	}
	id, ok := st.verifiedOrHeaders(h)
	if (auth || resolve) && !(ok && id.Verified()) {
		user, refused := st.pluginIdentity(headers, rc, auth, resolve)
		if refused != nil {
			return refused
		}
		if user != nil {
			id, ok = *user, true
		}
	}
	st.setCaller(id, ok)
	// What the HTTP hooks' plugins kept in their context reaches the MCP
	// hooks of the request, with the identity now known.
	rc.Global.User, rc.Global.UserContext, rc.Global.TenantID = st.global.User, st.global.UserContext, st.global.TenantID
	st.httpContext = rc
	return nil
}

// requestContext returns the plugin context of the current message's
// hooks, made at the first of them: a copy of the HTTP hooks' context when
// they ran (so each message of a batch starts from it, never from another
// message's), else a fresh one. The message's later hooks get the same
// context, so what a plugin keeps in http_auth_check_permission reaches
// its pre hook, token_delegate and its post hook.
func (st *stream) requestContext() *executor.RequestContext {
	if st.msgContext == nil {
		if st.httpContext != nil {
			st.msgContext = st.httpContext.Clone()
		} else {
			st.msgContext = executor.NewRequestContext(st.global)
		}
	}
	return st.msgContext
}

// verifiedOrHeaders resolves the configured sources, if any.
func (st *stream) verifiedOrHeaders(h *extprocv3.HttpHeaders) (identity.Identity, bool) {
	if st.snap.Identity == nil {
		return identity.Identity{}, false
	}
	return st.snap.Identity.Resolve(st.identityRequest(h))
}

// requestHeaderMap is a header map as the HTTP hooks and the rules get it:
// by lower-case name, repeated headers joined (cookies with "; "), without
// pseudo-headers.
func requestHeaderMap(hm *corev3.HeaderMap) map[string]string {
	out := make(map[string]string, len(hm.GetHeaders()))
	for _, hv := range hm.GetHeaders() {
		k := hv.GetKey()
		if k == "" || strings.HasPrefix(k, ":") {
			continue
		}
		if prev, ok := out[k]; ok {
			sep := ", "
			if k == "cookie" {
				sep = "; "
			}
			out[k] = prev + sep + headerValue(hv)
			continue
		}
		out[k] = headerValue(hv)
	}
	return out
}

// preRequest runs http_pre_request and keeps the headers to set; headers
// gets them too, so http_auth_resolve_user sees the new values.
func (st *stream) preRequest(h *extprocv3.HttpHeaders, method, path string, headers map[string]string, rc *executor.RequestContext) *extprocv3.ProcessingResponse {
	p, _, _ := strings.Cut(path, "?")
	payload, err := json.Marshal(cpex.HTTPPreRequestPayload{Path: p, Method: method, Headers: headers,
		ClientHost: st.client.host, ClientPort: st.client.port})
	if err != nil {
		return internalError(st, "http_pre_request payload: "+err.Error())
	}
	out := st.snap.Hooks.Run(st.ctx, cpex.HTTPPreRequest, payload, rc, executor.Target{})
	if r, blocked := st.refusalOf(out, 0, nil, cpex.HTTPPreRequest); blocked {
		if out.Violation != nil && out.Violation.HTTPStatusCode == nil {
			r.status = http.StatusForbidden
		}
		if method == http.MethodPost && !h.GetEndOfStream() {
			st.httpRefusal = &r
			return nil
		}
		return st.refuseAtHeaders(r)
	}
	if !out.Modified {
		return nil
	}
	var modified cpex.HTTPPreRequestPayload
	if err := json.Unmarshal(out.Payload, &modified); err != nil {
		return internalError(st, "http_pre_request result: "+err.Error())
	}
	sets := st.settableSets(cpex.HTTPPreRequest, headers, modified.Headers)
	for k, v := range sets {
		headers[k] = v
	}
	st.headerSets = sets
	return nil
}

// withSetHeaders returns resp with sets added to the header mutation of
// the headers reply headersOf finds in it (GetRequestHeaders or
// GetResponseHeaders): a copy, since the canned replies are shared. resp
// is returned as is when there is nothing to set or no such reply.
func withSetHeaders(resp *extprocv3.ProcessingResponse, headersOf func(*extprocv3.ProcessingResponse) *extprocv3.HeadersResponse, sets map[string]string) *extprocv3.ProcessingResponse {
	if len(sets) == 0 || headersOf(resp) == nil {
		return resp
	}
	resp = proto.Clone(resp).(*extprocv3.ProcessingResponse)
	hr := headersOf(resp)
	if hr.Response == nil {
		hr.Response = &extprocv3.CommonResponse{}
	}
	if hr.Response.HeaderMutation == nil {
		hr.Response.HeaderMutation = &extprocv3.HeaderMutation{}
	}
	for k, v := range sets {
		hr.Response.HeaderMutation.SetHeaders = append(hr.Response.HeaderMutation.SetHeaders, header(k, v))
	}
	return resp
}

// refuseAtBody answers the body of a request http_pre_request refused:
// each request of it gets the JSON-RPC error with its id.
func (st *stream) refuseAtBody(body []byte) *extprocv3.ProcessingResponse {
	r := *st.httpRefusal
	msgs, err := mcpmsg.Parse(body)
	if err != nil || len(msgs.Messages) == 0 {
		return st.refuseAtHeaders(r)
	}
	refusals := make([]refusal, 0, len(msgs.Messages))
	for i := range msgs.Messages {
		ri := r
		ri.index, ri.id = i, msgs.Messages[i].ID
		refusals = append(refusals, ri)
	}
	return st.refuse(msgs, refusals)
}

// refuseAtHeaders answers a request refused before its JSON-RPC id is
// known: the refusal's status (a 200 becomes 403 for a block, 500 for a
// failed plugin) and an id-less JSON-RPC error.
func (st *stream) refuseAtHeaders(r refusal) *extprocv3.ProcessingResponse {
	status := r.status
	if status == http.StatusOK {
		status = http.StatusForbidden
		if r.reason == "plugin_error" {
			status = http.StatusInternalServerError
		}
	}
	st.obs.Immediate(r.reason)
	return jsonRPCReply(status, r.errorResponse(), r.denied, r.headers)
}

// resolveUser runs http_auth_resolve_user; it returns the user, or nil
// when no plugin named one, or the reply refusing the request.
func (st *stream) resolveUser(headers map[string]string, rc *executor.RequestContext) (*identity.Identity, *extprocv3.ProcessingResponse) {
	p := cpex.HTTPAuthResolveUserPayload{Headers: headers, ClientHost: st.client.host, ClientPort: st.client.port}
	if scheme, cred, ok := strings.Cut(headers["authorization"], " "); ok && scheme != "" {
		p.Credentials = &cpex.HTTPCredentials{Scheme: scheme, Credentials: strings.TrimSpace(cred)}
	}
	payload, err := json.Marshal(p)
	if err != nil {
		return nil, internalError(st, "http_auth_resolve_user payload: "+err.Error())
	}
	out := st.snap.Hooks.Run(st.ctx, cpex.HTTPAuthResolveUser, payload, rc, executor.Target{})
	if r, blocked := st.refusalOf(out, 0, nil, cpex.HTTPAuthResolveUser); blocked {
		return nil, st.refuseAtHeaders(authRefusal(out, r)) // identityresolve.go
	}
	if !out.Modified {
		return nil, nil
	}
	var u cpex.ResolvedUser
	if err := json.Unmarshal(out.Payload, &u); err != nil || strings.TrimSpace(u.Email) == "" {
		st.logger().Info().Msg("http_auth_resolve_user: the user has no email; ignored")
		return nil, nil
	}
	if u.IsActive != nil && !*u.IsActive {
		return nil, st.refuseAtHeaders(refusal{code: mcpmsg.CodeInvalidRequest, status: http.StatusUnauthorized, reason: "blocked",
			denied: true, message: "account disabled", headers: unauthorizedHeaders(nil)})
	}
	return &identity.Identity{Source: identity.SourcePlugin, User: u.Email, Email: u.Email, Name: u.FullName, IsAdmin: u.IsAdmin}, nil
}

// unauthorizedHeaders adds WWW-Authenticate: Bearer unless the plugin set
// a challenge.
func unauthorizedHeaders(h map[string]string) map[string]string {
	out := make(map[string]string, len(h)+1)
	for k, v := range h {
		out[strings.ToLower(k)] = v
	}
	if _, ok := out["www-authenticate"]; !ok {
		out["www-authenticate"] = "Bearer"
	}
	return out
}
