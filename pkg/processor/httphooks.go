package processor

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
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
//     those hookfamily.MaySetHeader refuses. A violation refuses the
//     request with its http_status_code (default 403) and headers;
//     enforced, unlike ContextForge, because nothing stands behind the
//     sidecar. A POST with a body is refused at its body, so the JSON-RPC
//     error carries the request's id.
//   - http_auth_resolve_user runs when no verified source (JWT metadata,
//     mTLS peer) named the caller. The user it returns is the identity and
//     wins over any header; a violation, or a user with is_active false, is
//     a 401 with WWW-Authenticate: Bearer.
//   - identity_resolve (cpex's token → subject hook) is asked when no
//     verified source and no http_auth_resolve_user plugin named the
//     caller, and only when the request has a bearer token. The subject it
//     answers is the identity; rejected:true, or a violation, is a 401 (or
//     its reject_status) with WWW-Authenticate: Bearer.
//   - http_post_request runs at the response headers (the plan then asks
//     for them). The plugins get the request as the HTTP hooks saw it, the
//     response headers and the status, with the plugin context of the
//     request phase: what the plugins kept in http_pre_request and, for a
//     body of one message, in that message's hooks. The headers they return
//     are set on the response; a violation replaces the response with its
//     http_status_code (default 403) and an id-less JSON-RPC error.

// httpHooks runs the HTTP-level hooks of one request and keeps what they
// decided.
type httpHooks struct {
	x *exchange
	// headerSets are the request headers http_pre_request set.
	headerSets map[string]string
	// refusal is http_pre_request's refusal of a POST, answered at the
	// body (request.go).
	refusal *refusal
	// context is the plugin context the HTTP hooks left, copied into each
	// message's hooks (exchange.requestContext).
	context *executor.RequestContext
	// req is the request as the HTTP hooks saw it, kept when
	// http_post_request will run on the response headers.
	req *httpRequest
	// client is the downstream peer Envoy named, for client_host and
	// client_port.
	client clientAddress
}

// httpRequest is the request as the HTTP hooks saw it.
type httpRequest struct {
	method, path string
	headers      map[string]string
}

// beforeMCP runs the HTTP hooks, when a plugin has one, and resolves the
// identity (exchange.identify); it returns the reply when the request is
// refused now.
func (hh *httpHooks) beforeMCP(h *extprocv3.HttpHeaders, envoy *envoyContext) *extprocv3.ProcessingResponse {
	x := hh.x
	hooks := x.snap.Hooks
	pre, auth := hooks.Applies(cpex.HTTPPreRequest), hooks.Applies(cpex.HTTPAuthResolveUser)
	post, resolve := hooks.Applies(cpex.HTTPPostRequest), hooks.Applies(cpex.IdentityResolve)
	var id identity.Identity
	var ok bool
	if x.snap.Identity != nil {
		id, ok = x.snap.Identity.Resolve(envoy.identityRequest(x, h))
	}
	x.ensureContext()
	method := x.req.method
	path, _, _ := strings.Cut(x.req.path, "?")
	headers := requestHeaderMap(h.GetHeaders())
	rc := executor.NewRequestContext(x.req.global)
	rc.Secrets = credentialSecrets(headers)
	if pre {
		if refused := hh.preRequest(h, method, path, headers, rc); refused != nil {
			return refused
		}
		if hh.refusal != nil {
			return nil // refused at the body
		}
	}
	if post {
		hh.req = &httpRequest{method: method, path: path, headers: headers}
	}
	if (auth || resolve) && !(ok && id.Verified()) {
		user, refused := hh.pluginIdentity(headers, rc, auth, resolve)
		if refused != nil {
			return refused
		}
		if user != nil {
			id, ok = *user, true
		}
	}
	x.setCaller(id, ok)
	// What the HTTP hooks' plugins kept in their context reaches the MCP
	// hooks of the request, with the identity now known.
	g := &x.req.global
	rc.Global.User, rc.Global.UserContext, rc.Global.TenantID = g.User, g.UserContext, g.TenantID
	hh.context = rc
	return nil
}

// preRequest runs http_pre_request and keeps the headers to set; headers
// gets them too, so http_auth_resolve_user sees the new values.
func (hh *httpHooks) preRequest(h *extprocv3.HttpHeaders, method, path string, headers map[string]string, rc *executor.RequestContext) *extprocv3.ProcessingResponse {
	x := hh.x
	payload, err := json.Marshal(cpex.HTTPPreRequestPayload{Path: path, Method: method, Headers: headers,
		ClientHost: hh.client.host, ClientPort: hh.client.port})
	if err != nil {
		return x.internalError("http_pre_request payload: " + err.Error())
	}
	out := x.snap.Hooks.Run(x.ctx, cpex.HTTPPreRequest, payload, rc, executor.Target{})
	if r, blocked := x.refusalOf(out, 0, nil, cpex.HTTPPreRequest); blocked {
		if out.Violation != nil && out.Violation.HTTPStatusCode == nil {
			r.status = http.StatusForbidden
		}
		if method == http.MethodPost && !h.GetEndOfStream() {
			hh.refusal = &r
			return nil
		}
		return x.refuseAtHeaders(r)
	}
	if !out.Modified {
		return nil
	}
	var modified cpex.HTTPPreRequestPayload
	if err := json.Unmarshal(out.Payload, &modified); err != nil {
		return x.internalError("http_pre_request result: " + err.Error())
	}
	sets := hh.settable(cpex.HTTPPreRequest, headers, modified.Headers)
	for k, v := range sets {
		headers[k] = v
	}
	hh.headerSets = sets
	return nil
}

// pluginIdentity runs the plugin identity sources in order:
// http_auth_resolve_user, then identity_resolve. It returns the identity,
// or nil when none named the caller, or the reply refusing the request.
func (hh *httpHooks) pluginIdentity(headers map[string]string, rc *executor.RequestContext, auth, resolve bool) (*identity.Identity, *extprocv3.ProcessingResponse) {
	if auth {
		if user, refused := hh.resolveUser(headers, rc); user != nil || refused != nil {
			return user, refused
		}
	}
	if resolve {
		return hh.identityResolve(headers, rc)
	}
	return nil, nil
}

// resolveUser runs http_auth_resolve_user; it returns the user, or nil
// when no plugin named one, or the reply refusing the request.
func (hh *httpHooks) resolveUser(headers map[string]string, rc *executor.RequestContext) (*identity.Identity, *extprocv3.ProcessingResponse) {
	x := hh.x
	p := cpex.HTTPAuthResolveUserPayload{Headers: headers, ClientHost: hh.client.host, ClientPort: hh.client.port}
	if scheme, cred, ok := strings.Cut(headers["authorization"], " "); ok && scheme != "" {
		p.Credentials = &cpex.HTTPCredentials{Scheme: scheme, Credentials: strings.TrimSpace(cred)}
	}
	modified, refused := hh.identityHook(cpex.HTTPAuthResolveUser, p, rc)
	if modified == nil {
		return nil, refused
	}
	var u cpex.ResolvedUser
	if err := json.Unmarshal(modified, &u); err != nil || strings.TrimSpace(u.Email) == "" {
		x.logger().Info().Msg("http_auth_resolve_user: the user has no email; ignored")
		return nil, nil
	}
	if u.IsActive != nil && !*u.IsActive {
		return nil, x.refuseAtHeaders(refusal{code: mcpmsg.CodeInvalidRequest, status: http.StatusUnauthorized, reason: "blocked",
			denied: true, message: "account disabled", headers: unauthorizedHeaders(nil)})
	}
	return &identity.Identity{Source: identity.SourcePlugin, User: u.Email, Email: u.Email, Name: u.FullName, IsAdmin: u.IsAdmin}, nil
}

// identityResolve runs identity_resolve with the caller's bearer token.
// cpex 0.1.3 serves this hook correctly over MCP only (docs/identity.md).
func (hh *httpHooks) identityResolve(headers map[string]string, rc *executor.RequestContext) (*identity.Identity, *extprocv3.ProcessingResponse) {
	x := hh.x
	scheme, token, _ := strings.Cut(headers["authorization"], " ")
	if token = strings.TrimSpace(token); !strings.EqualFold(scheme, "bearer") || token == "" {
		return nil, nil
	}
	modified, refused := hh.identityHook(cpex.IdentityResolve, cpex.IdentityResolvePayload{RawToken: token, Source: "bearer", Headers: headers,
		ClientHost: hh.client.host, ClientPort: hh.client.port}, rc)
	if modified == nil {
		return nil, refused
	}
	var res cpex.IdentityResolution
	if err := json.Unmarshal(modified, &res); err != nil || res.Subject == nil || strings.TrimSpace(res.Subject.ID) == "" {
		x.logger().Info().Msg("identity_resolve: no subject id; ignored")
		return nil, nil
	}
	s := res.Subject
	id := identity.Identity{Source: identity.SourcePlugin, User: s.ID, Roles: s.Roles, Teams: s.Teams}
	if strings.Contains(s.ID, "@") {
		id.Email = s.ID
	}
	return &id, nil
}

// identityHook runs an identity hook (http_auth_resolve_user,
// identity_resolve) on payload p; it returns the modified payload, or nil
// and, when the hook refused the caller, the reply refusing the request.
func (hh *httpHooks) identityHook(hook cpex.HookType, p any, rc *executor.RequestContext) (json.RawMessage, *extprocv3.ProcessingResponse) {
	x := hh.x
	payload, err := json.Marshal(p)
	if err != nil {
		return nil, x.internalError(string(hook) + " payload: " + err.Error())
	}
	out := x.snap.Hooks.Run(x.ctx, hook, payload, rc, executor.Target{})
	if r, blocked := x.refusalOf(out, 0, nil, hook); blocked {
		return nil, x.refuseAtHeaders(authRefusal(out, r))
	}
	if !out.Modified {
		return nil, nil
	}
	return out.Payload, nil
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

// postRequest runs http_post_request on the response headers; it returns
// the headers to set, or the reply refusing the response. It is called
// only when the plan kept the request for it (hh.req is set).
func (hh *httpHooks) postRequest(h *extprocv3.HttpHeaders) (map[string]string, *extprocv3.ProcessingResponse) {
	x := hh.x
	resp := requestHeaderMap(h.GetHeaders())
	status, _ := strconv.Atoi(headerValue(findHeader(h.GetHeaders(), ":status")))
	payload, err := json.Marshal(cpex.HTTPPostRequestPayload{Path: hh.req.path, Method: hh.req.method,
		Headers: hh.req.headers, ClientHost: hh.client.host, ClientPort: hh.client.port, ResponseHeaders: resp, StatusCode: status})
	if err != nil {
		return nil, x.internalError("http_post_request payload: " + err.Error())
	}
	rc := x.hookCtx.msg // a body of one message: its hooks' context
	if rc == nil {
		rc = hh.context
	}
	if rc == nil {
		rc = executor.NewRequestContext(x.req.global)
		rc.Secrets = credentialSecrets(hh.req.headers)
	}
	out := x.snap.Hooks.Run(x.ctx, cpex.HTTPPostRequest, payload, rc, executor.Target{})
	if r, blocked := x.refusalOf(out, 0, nil, cpex.HTTPPostRequest); blocked {
		if out.Violation != nil && out.Violation.HTTPStatusCode == nil {
			r.status = http.StatusForbidden
		}
		return nil, x.refuseAtHeaders(r)
	}
	if !out.Modified {
		return nil, nil
	}
	var modified cpex.HTTPPostRequestPayload
	if err := json.Unmarshal(out.Payload, &modified); err != nil {
		return nil, x.internalError("http_post_request result: " + err.Error())
	}
	return hh.settable(cpex.HTTPPostRequest, resp, modified.ResponseHeaders), nil
}

// settable returns the headers of set that differ from have and a plugin
// answering hook may set (hookfamily.MaySetHeader); the others are logged
// by name only.
func (hh *httpHooks) settable(hook cpex.HookType, have, set map[string]string) map[string]string {
	var out map[string]string
	for k, v := range set {
		k = strings.ToLower(k)
		old, sent := have[k]
		if sent && old == v {
			continue
		}
		if !hookfamily.MaySetHeader(hook, k, v, sent, hh.x.snap.Settings.AllowCredentialHeaders) {
			hh.x.logger().Info().Str("header", k).Msg(string(hook) + ": header not set (not a header plugins may set)")
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
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
