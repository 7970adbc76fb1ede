package processor

import (
	"net"
	"strconv"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
	"github.com/mcp-extproc/mcp-extproc/pkg/rules"
	"github.com/mcp-extproc/mcp-extproc/pkg/structwire"
)

// Who is calling is decided at the request headers, from what Envoy sent
// with them: the dynamic metadata of metadata_options.forwarding_namespaces
// (a jwt_authn payload) and the attributes of request_attributes (the mTLS
// peer), which Envoy puts on the request-headers message, so identity costs
// no extra ext_proc message. With extproc.identity, the resolved identity
// replaces anything else in the plugin context's user, user_context and
// tenant_id, and a request no source answers has none; without it the
// legacy header settings apply (requestFacts.readConfigured). A plugin
// identity hook (httphooks.go) answers when no verified source did.

// callerState is who is calling, once known.
type callerState struct {
	// id is the resolved identity; nil when no source named the caller.
	id *identity.Identity
	// claims is the caller's JWT payload, once a rule has read it.
	claims *structpb.Struct
	// listers hide list items from this caller by the rules, per call
	// method (rules.go).
	listers map[string]*rules.Lister
}

// identify resolves who is calling from the configured sources and, when
// a plugin has a hook dispatched at the headers (cpex.AtRequestHeaders,
// AtResponseHeaders: http_pre_request, the identity hooks,
// http_post_request), runs them (httphooks.go), which may name the caller
// or refuse the request: the reply is returned then.
func (x *exchange) identify(h *extprocv3.HttpHeaders, envoy *envoyContext) *extprocv3.ProcessingResponse {
	atHeaders := x.hooked.atHeaders
	if atHeaders || x.hooked.permission {
		x.http.client = envoy.client() // client_host and client_port of their payloads
	}
	if atHeaders {
		return x.http.beforeMCP(h, envoy)
	}
	if x.snap.Identity != nil {
		x.setCaller(x.snap.Identity.Resolve(envoy.identityRequest(x, h)))
	}
	return nil
}

// setCaller makes id, when ok, who is calling: for the plugin context and
// the rules. Without one, and with extproc.identity configured, the plugin
// context has no identity (nothing a header set survives); without
// extproc.identity the legacy header settings stay.
func (x *exchange) setCaller(id identity.Identity, ok bool) {
	g := &x.req.global
	switch {
	case ok:
		id.Apply(g)
		x.caller = callerState{id: &id}
	case x.snap.Identity != nil:
		g.User, g.UserContext, g.TenantID = nil, nil, ""
	}
}

// callerClaims is the caller's verified JWT payload, decoded the first time
// a rule reads identity.claims (rules.Input.Claims); nil without one.
func (x *exchange) callerClaims() *structpb.Struct {
	c := &x.caller
	if c.claims == nil && c.id != nil && c.id.Claims != nil {
		s, err := c.id.Claims.Decode()
		if err != nil { // checked by structwire.Parse: cannot happen
			x.logger().Warn().Err(err).Msg("the caller's JWT payload does not decode")
			s = &structpb.Struct{}
		}
		c.claims = s
	}
	return c.claims
}

// envoyContext is what Envoy sent beside the request headers: dynamic
// metadata and attributes, readable while the request-headers message is
// answered. Its metadata is checked once, when first read.
type envoyContext struct {
	msg      *extprocv3.ProcessingRequest
	metadata structwire.Metadata
	read     bool
}

// forwarded returns the metadata Envoy forwarded with the request headers,
// checked the first time something reads it (an identity source, Envoy's
// MCP filter); metadata that does not decode is none, and said so in the
// log.
func (e *envoyContext) forwarded(x *exchange) structwire.Metadata {
	if !e.read {
		md, err := forwardedMetadata(e.msg)
		if err != nil {
			x.logger().Warn().Err(err).Msg("Envoy's forwarded metadata does not decode: read as none")
		}
		e.metadata, e.read = md, true
	}
	return e.metadata
}

// identityRequest is what the identity sources read from this request;
// the metadata only when a source reads it.
func (e *envoyContext) identityRequest(x *exchange, h *extprocv3.HttpHeaders) *identity.Request {
	req := &identity.Request{
		Attributes: e.msg.GetAttributes()[identity.AttributesKey],
		Header: func(name string) (string, bool) {
			return singleHeader(h, name)
		},
	}
	if x.snap.Identity.ReadsMetadata() {
		req.Metadata = e.forwarded(x)
	}
	return req
}

// Envoy's MCP filter (envoy.filters.http.mcp), placed before ext_proc,
// holds the request headers until it has parsed the body of an MCP POST,
// and writes what it read (jsonrpc, method, id, params.name or params.uri,
// is_mcp_request) to dynamic metadata, which metadata_options forwards on
// the request-headers message. For a request whose headers do not name its
// method (MCP 2025-11-25 and older), that method decides at the request
// headers whether the answer must be read (plan.go). Envoy's parse is not
// the one that counts: the body is still read, and a body whose method is
// not the one Envoy read is refused (request.go).

// mcpFilterMethod returns the method Envoy's MCP filter read from this
// request's body, when the configuration reads the filter's namespace ns
// and Envoy sent it; "" otherwise.
func (e *envoyContext) mcpFilterMethod(ns string, x *exchange) string {
	if ns == "" {
		return ""
	}
	f, _ := e.forwarded(x).Namespace(ns)
	if mcp, _ := f.Field("is_mcp_request").Bool(); !mcp {
		return ""
	}
	method, _ := f.Field("method").String()
	return method
}

// The HTTP hooks' payloads carry the caller's address as client_host and
// client_port, as ContextForge fills them from the connection. Here they
// come from what Envoy says of the downstream connection: the request
// attributes source.address ("ip:port") and source.port, which Envoy sends
// on the request-headers message when the ext_proc filter lists them in
// request_attributes. Never from a header a client can write, such as
// x-forwarded-for: without the attributes, the fields are left out.

// Attribute names of the downstream peer's address.
const (
	attrSourceAddress = "source.address"
	attrSourcePort    = "source.port"
)

// maxClientHost bounds the client_host taken from source.address.
const maxClientHost = 256

// clientAddress is the downstream peer as Envoy saw it.
type clientAddress struct {
	host string
	port int
}

// client returns the downstream peer's address from the attributes.
func (e *envoyContext) client() clientAddress {
	fields := e.msg.GetAttributes()[identity.AttributesKey].GetFields()
	if len(fields) == 0 {
		return clientAddress{}
	}
	return clientOf(fields[attrSourceAddress], fields[attrSourcePort])
}

// clientOf reads source.address and source.port; the port is taken from
// the address when source.port is absent. A value that is not usable
// (empty, over-long, with a control character, a port out of range) is
// left out.
func clientOf(addr, port *structpb.Value) clientAddress {
	var c clientAddress
	a := addr.GetStringValue()
	host, p, err := net.SplitHostPort(a)
	if err != nil {
		host, p = a, ""
	}
	if host != "" && len(host) <= maxClientHost && !strings.ContainsFunc(host, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		c.host = host
	}
	switch v := port.GetKind().(type) {
	case *structpb.Value_NumberValue:
		c.port = validPort(v.NumberValue)
	case *structpb.Value_StringValue:
		n, _ := strconv.Atoi(v.StringValue)
		c.port = validPort(float64(n))
	default:
		n, _ := strconv.Atoi(p)
		c.port = validPort(float64(n))
	}
	return c
}

// validPort returns n as a port, or 0 when it is not one.
func validPort(n float64) int {
	if n < 1 || n > 65535 || n != float64(int(n)) {
		return 0
	}
	return int(n)
}
