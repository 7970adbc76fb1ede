package processor

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
)

// http_post_request runs at the response headers of a request to an MCP
// path, only when a plugin has it: the request-headers reply then asks
// Envoy for the response headers even where it would skip them (a
// passthrough, a request no post hook reads). The plugins get the request
// as the HTTP hooks saw it (path, method, headers after http_pre_request),
// the response headers and the status, with the plugin context of the
// request phase: what the plugins kept in http_pre_request and, for a body
// of one message, in that message's hooks (http_auth_check_permission, its
// pre hook, token_delegate); its post hook, which runs later on the
// response body, then sees what they keep here. The headers they
// return are set on the response, with the protections of http_pre_request
// (never ":"-headers, host, x-envoy*, framing or MCP headers, nor a
// credential header the server sent unless allow_credential_headers). A
// violation replaces the response with its http_status_code (default 403)
// and an id-less JSON-RPC error: enforced, as http_pre_request's are.

// httpRequest is the request as the HTTP hooks saw it.
type httpRequest struct {
	method, path string
	headers      map[string]string
}

// withResponseHeaders makes a request-headers reply ask for the response
// headers when http_post_request will run on them (a copy: the canned
// replies are shared).
func (st *stream) withResponseHeaders(resp *extprocv3.ProcessingResponse) *extprocv3.ProcessingResponse {
	if st.httpReq == nil || resp.GetRequestHeaders() == nil || resp.GetModeOverride().GetResponseHeaderMode() != filterv3.ProcessingMode_SKIP {
		return resp
	}
	resp = proto.Clone(resp).(*extprocv3.ProcessingResponse)
	resp.ModeOverride.ResponseHeaderMode = filterv3.ProcessingMode_SEND
	return resp
}

// postRequest runs http_post_request on the response headers; it returns
// the headers to set, or the reply refusing the response.
func (st *stream) postRequest(h *extprocv3.HttpHeaders) (map[string]string, *extprocv3.ProcessingResponse) {
	if st.httpReq == nil {
		return nil, nil
	}
	resp := requestHeaderMap(h.GetHeaders())
	status, _ := strconv.Atoi(headerValue(findHeader(h.GetHeaders(), ":status")))
	payload, err := json.Marshal(cpex.HTTPPostRequestPayload{Path: st.httpReq.path, Method: st.httpReq.method,
		Headers: st.httpReq.headers, ClientHost: st.client.host, ClientPort: st.client.port, ResponseHeaders: resp, StatusCode: status})
	if err != nil {
		return nil, internalError(st, "http_post_request payload: "+err.Error())
	}
	rc := st.msgContext // a body of one message: its hooks' context
	if rc == nil {
		rc = st.httpContext
	}
	if rc == nil {
		rc = executor.NewRequestContext(st.global)
		rc.Secrets = credentialSecrets(st.httpReq.headers)
	}
	out := st.snap.Hooks.Run(st.ctx, cpex.HTTPPostRequest, payload, rc, executor.Target{})
	if r, blocked := st.refusalOf(out, 0, nil, cpex.HTTPPostRequest); blocked {
		if out.Violation != nil && out.Violation.HTTPStatusCode == nil {
			r.status = http.StatusForbidden
		}
		return nil, st.refuseAtHeaders(r)
	}
	if !out.Modified {
		return nil, nil
	}
	var modified cpex.HTTPPostRequestPayload
	if err := json.Unmarshal(out.Payload, &modified); err != nil {
		return nil, internalError(st, "http_post_request result: "+err.Error())
	}
	return st.settableSets(cpex.HTTPPostRequest, resp, modified.ResponseHeaders), nil
}

// settableSets returns the headers of set that differ from have and a
// plugin answering hook may set (hookfamily.MaySetHeader); the others
// are logged by name only.
func (st *stream) settableSets(hook cpex.HookType, have, set map[string]string) map[string]string {
	var out map[string]string
	for k, v := range set {
		k = strings.ToLower(k)
		old, sent := have[k]
		if sent && old == v {
			continue
		}
		if !hookfamily.MaySetHeader(hook, k, v, sent, st.snap.Settings.AllowCredentialHeaders) {
			st.logger().Info().Str("header", k).Msg(string(hook) + ": header not set (not a header plugins may set)")
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}
