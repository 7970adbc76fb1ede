package processor

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
	"github.com/mcp-extproc/mcp-extproc/pkg/structwire"
)

// Who is calling is decided at the request headers, from what Envoy sent
// with them: the dynamic metadata of metadata_options.forwarding_namespaces
// (a jwt_authn payload) and the attributes of request_attributes (the mTLS
// peer), which Envoy puts on the request-headers message, so identity costs
// no extra ext_proc message. With extproc.identity, the resolved identity
// replaces anything else in the plugin context's user, user_context and
// tenant_id, and a request no source answers has none; without it the
// legacy header settings apply (readConfiguredHeader).

// requestHeadersMessage answers a request_headers message; the rest of the
// message (metadata, attributes) is readable during the call only.
func (st *stream) requestHeadersMessage(r *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	st.envoyContext = r
	defer func() { st.envoyContext, st.metadata, st.metadataRead = nil, nil, false }()
	return st.requestHeaders(r.GetRequestHeaders())
}

// envoyMetadata returns the metadata Envoy forwarded with the request headers,
// checked the first time something reads it (an identity source, Envoy's
// MCP filter); metadata that does not decode is none, and said so in the
// log.
func (st *stream) envoyMetadata() structwire.Metadata {
	if !st.metadataRead {
		md, err := forwardedMetadata(st.envoyContext)
		if err != nil {
			st.logger().Warn().Err(err).Msg("Envoy's forwarded metadata does not decode: read as none")
		}
		st.metadata, st.metadataRead = md, true
	}
	return st.metadata
}

// resolveIdentity sets the plugin context's identity from the configured
// sources, or clears it when none answers.
func (st *stream) resolveIdentity(h *extprocv3.HttpHeaders) {
	st.setCaller(st.snap.Identity.Resolve(st.identityRequest(h)))
}

// setCaller makes id, when ok, who is calling: for the plugin context and
// the rules. Without one, and with extproc.identity configured, the plugin
// context has no identity (nothing a header set survives); without
// extproc.identity the legacy header settings stay.
func (st *stream) setCaller(id identity.Identity, ok bool) {
	switch {
	case ok:
		id.Apply(&st.global)
		st.caller = &id
		st.claims = nil
	case st.snap.Identity != nil:
		st.global.User, st.global.UserContext, st.global.TenantID = nil, nil, ""
	}
}

// singleHeader returns the value of a header sent exactly once; a header
// sent twice is not believed (which copy did Envoy set?).
func singleHeader(h *extprocv3.HttpHeaders, name string) (string, bool) {
	var v string
	n := 0
	for _, hv := range h.GetHeaders().GetHeaders() {
		if hv.GetKey() == name {
			v, n = headerValue(hv), n+1
		}
	}
	return v, n == 1
}

// identityRequest is what the identity sources read from this request;
// the metadata only when a source reads it.
func (st *stream) identityRequest(h *extprocv3.HttpHeaders) *identity.Request {
	req := &identity.Request{
		Attributes: st.envoyContext.GetAttributes()[identity.AttributesKey],
		Header: func(name string) (string, bool) {
			return singleHeader(h, name)
		},
	}
	if st.snap.Identity.ReadsMetadata() {
		req.Metadata = st.envoyMetadata()
	}
	return req
}

// callerClaims is the caller's verified JWT payload, decoded the first time
// a rule reads identity.claims (rules.Input.Claims); nil without one.
func (st *stream) callerClaims() *structpb.Struct {
	if st.claims == nil && st.caller != nil && st.caller.Claims != nil {
		c, err := st.caller.Claims.Decode()
		if err != nil { // checked by structwire.Parse: cannot happen
			st.logger().Warn().Err(err).Msg("the caller's JWT payload does not decode")
			c = &structpb.Struct{}
		}
		st.claims = c
	}
	return st.claims
}
