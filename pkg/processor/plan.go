package processor

import (
	"encoding/json"
	"net/http"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/contentcoding"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpheaders"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcplist"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// What a request costs is decided at its headers, once, as a plan: each
// ext_proc message is a round trip through Envoy, so the request body is
// asked for only when a hook, a rule or pinning may act on it, and the
// response headers only when the answer may be read (a post hook, a list
// the rules filter or pinning checks, a list hook, records waiting for
// the server to accept a session) or http_post_request runs on them
// (docs/extproc-contract.md §3.1: SKIP in the request-headers reply
// suppresses them). Replies follow the plan (canned.forPlan); nothing
// else asks Envoy for a message.
//
// MCP 2026-07-28 names the method (Mcp-Method) and the target (Mcp-Name)
// in headers, and a conforming server refuses a request whose headers
// disagree with its body (docs/mcp-result-paths.md §4). With
// extproc.trust_mcp_method_header (the default), a request declaring that
// version is decided from its headers: no body at all when no hook applies
// to its method, or when no plugin's conditions select its target. When
// the body is read anyway, the body path checks the headers against it.
// Envoy's MCP filter, when its metadata is forwarded, names the method of
// older requests (caller.go).
//
// Whether a hook applies is asked of Hooks on every request, not frozen per
// configuration: the executor caches its plan per plugin generation, and
// plugins can be disabled at run time (on_error: disable) or change with a
// reload of their server's config.

// planner decides the plan of one request (decide); it reads the
// configuration, the request's headers, the caller and Envoy's MCP-filter
// metadata, and changes nothing.
type planner struct{ x *exchange }

// plan is what Envoy is asked to send of one request.
type plan struct {
	// body: the request body, buffered.
	body bool
	// answer: the response headers. readAnswer: the answer's body may be
	// read, so Accept-Encoding is removed and the server answers
	// uncompressed (answer.go decodes or refuses one that is not).
	answer, readAnswer bool
	// why says, for the debug line, what decided it.
	why string
}

// label is the plan's name in the mode-override metric.
func (p plan) label() string {
	switch {
	case p.body && p.readAnswer:
		return "request_buffered"
	case p.body:
		return "request_buffered_only"
	case p.readAnswer:
		return "response_headers"
	}
	return "skip"
}

// next is the phase the plan leads to.
func (p plan) next() phase {
	switch {
	case p.body:
		return awaitingBody{}
	case p.answer:
		return awaitingAnswer{}
	}
	return passThrough{}
}

// requestHeaders answers the request headers: who is calling and the
// HTTP-level hooks, then the plan. The rest of the message (metadata,
// attributes) is readable during this call only.
func (x *exchange) requestHeaders(msg *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, phase) {
	h := msg.GetRequestHeaders()
	set := x.snap.Settings
	authority, repeated := x.req.read(h, set)
	mcpPath := x.req.method != "" && set.IsMCPPath(x.req.path)
	if !mcpPath {
		return x.planned(plan{why: "not an MCP path"}), passThrough{}
	}
	if repeated != "" {
		return x.repeatedHeader(repeated), passThrough{}
	}
	envoy := envoyContext{msg: msg}
	// Who is calling, and the HTTP-level hooks (httphooks.go, caller.go).
	if refused := x.identify(h, &envoy); refused != nil {
		return refused, passThrough{}
	}
	if x.req.method == http.MethodDelete && x.results.reads() {
		x.results.forgetSession()
	}
	x.req.authority = string(authority)
	if x.req.method == http.MethodPost && !h.GetEndOfStream() {
		x.req.headers = h.GetHeaders() // read again only if a body check needs them
		x.req.envoyMethod = envoy.mcpFilterMethod(set.MCPFilterMetadata(), x)
		if refused := x.checkDeclaredMethod(); refused != nil {
			return refused, passThrough{}
		}
	}
	p := planner{x}.decide(h)
	if x.req.method == http.MethodGet && p.readAnswer {
		// The replay's results are looked up; a replayed list is
		// filtered for this GET's caller, whose headers the rules read.
		x.req.headers = h.GetHeaders()
		x.results.foreign = true
	}
	if x.log.GetLevel() <= zerolog.DebugLevel {
		x.logger().Debug().Bool("body", p.body).Bool("answer", p.answer).Bool("read_answer", p.readAnswer).Str("why", p.why).Msg("plan")
	}
	resp := x.planned(p)
	if x.http.headerSets != nil { // http_pre_request set headers (httphooks.go)
		resp = withSetHeaders(resp, (*extprocv3.ProcessingResponse).GetRequestHeaders, x.http.headerSets)
	}
	return resp, p.next()
}

// planned counts the plan and returns its reply.
func (x *exchange) planned(p plan) *extprocv3.ProcessingResponse {
	x.obs.ModeOverride(p.label())
	return x.canned.forPlan(p)
}

// decidePlan is the one place that decides which messages Envoy sends.
func (pl planner) decide(h *extprocv3.HttpHeaders) plan {
	x := pl.x
	var p plan
	switch r := &x.req; {
	case x.http.refusal != nil:
		// http_pre_request refused a POST: refused at its body, so that
		// each JSON-RPC error carries its request's id.
		p = plan{body: true, why: "refused by http_pre_request"}
	case r.method == http.MethodPost && h.GetEndOfStream():
		p.why = "a POST without a body holds no MCP message"
	case r.method == http.MethodPost && !x.hooked.atBody && x.snap.Rules.Len() == 0 && x.snap.Pins == nil:
		// Nothing acts on an MCP POST's body or answer: no hook that reads
		// them (a family's, a list hook, http_auth_check_permission,
		// token_delegate), no rules, no pinning.
		p.why = "no hook, rule or pin"
	case r.method == http.MethodPost:
		p = pl.needs()
	case r.method == http.MethodGet && x.results.reads():
		// A GET opens a stream that may replay answers (after
		// Last-Event-ID): they are read (requestHeaders).
		p = plan{answer: true, readAnswer: true, why: "a GET may replay answers"}
	default:
		p.why = "no message of a hook"
	}
	if x.http.req != nil && !p.answer {
		p.answer, p.why = true, "http_post_request reads the response headers"
	}
	return p
}

// needs plans an MCP POST with a body: whether the body must be read, and
// whether the answer may be.
func (pl planner) needs() plan {
	x := pl.x
	p := pl.hooksNeed()
	snap, method := x.snap, x.req.knownMCPMethod(x.snap.Settings)
	if snap.Rules.Len() > 0 {
		// Rules read every request (rules.go), and a list's answer when
		// they may hide some of it from this caller: when the method is
		// not known before the body, the answer's headers are asked for
		// (judging every rule here would cost as much) and its body read
		// only if a list was there.
		p.body = true
		if !p.answer && (method == "" || x.filtersLists(method)) {
			p.answer, p.why = true, "rules may filter a list"
		}
	}
	if pl.listHookNeeds(method) {
		p.body, p.answer, p.why = true, true, "a list hook" // listhooks.go
	}
	if snap.Pins != nil {
		// Pinning reads every request (a call of a changed definition is
		// refused) and every pinned list's answer (pinning.go).
		p.body = true
		if !p.answer && (method == "" || pinsList(snap, method)) {
			p.answer, p.why = true, "pinning checks a list"
		}
	}
	if p.body && !p.answer && x.results.awaitsAcceptance() {
		// The requests of a session no server accepted yet are recorded
		// when the answer says it does (results.go).
		p.answer, p.why = true, "records wait for the session's acceptance"
	}
	if p.why == "" {
		p.why = "rules or pinning read the request"
	}
	p.readAnswer = p.answer
	return p
}

// hooksNeed is needs for the plugin hooks.
func (pl planner) hooksNeed() plan {
	x := pl.x
	hooks, set := x.snap.Hooks, x.snap.Settings
	route, name, decided := x.req.declared(set)
	if !decided {
		if m := x.req.envoyMethod; m != "" { // Envoy read it from the body (caller.go)
			route, _ := hookfamily.ByMethod(m)
			return plan{body: true, answer: postApplies(hooks, route), why: "the method Envoy's MCP filter read"}
		}
		return plan{body: true, answer: x.hooked.post, why: "the method is known only from the body"}
	}
	method := string(headerBytes(x.req.std.method))
	if pl.checksPermission(method) {
		return plan{body: true, answer: postApplies(hooks, route), why: "a permission or delegation hook"}
	}
	if route == nil {
		return plan{why: "no hook family has the declared method"}
	}
	if route.TargetParam == "" {
		// The target is not in the request (it is learned from an earlier
		// one): conditions cannot be evaluated here.
		return plan{body: true, answer: postApplies(hooks, route), why: "the target is learned from an earlier request"}
	}
	t := hookfamily.Target{Family: route.Family, Name: name}
	if route.Pre && hooks.AppliesTo(route.Family.Pre, &x.req.global, t) {
		return plan{body: true, answer: postApplies(hooks, route), why: "a pre hook selects the declared target"}
	}
	post := route.Post && hooks.AppliesTo(route.Family.Post, &x.req.global, t)
	return plan{body: post, answer: post, why: "the declared target's post hook"}
}

// postApplies reports whether a post hook may apply to the answer of a
// request of route r (nil: no hook family has its method), its target
// unknown.
func postApplies(hooks Hooks, r *hookfamily.Route) bool {
	return r != nil && r.Post && hooks.Applies(r.Family.Post)
}

// checksPermission reports whether a request of this method needs its body
// read for http_auth_check_permission or token_delegate.
func (pl planner) checksPermission(method string) bool {
	x := pl.x
	op, ok := hookfamily.Operation(method)
	if !ok {
		return false
	}
	return (op.Delegated && x.hooked.delegate) || (op.Permission != "" && x.hooked.permission)
}

// listHookNeeds reports whether a list hook may apply to the answer of a
// request of method ("" when not known before the body: any list).
func (pl planner) listHookNeeds(method string) bool {
	x := pl.x
	if method != "" {
		l, ok := mcplist.ByMethod(method)
		return ok && x.snap.Hooks.Applies(l.Hook)
	}
	return x.hooked.listHook
}

// repeatedHeader refuses a request that names its session, protocol
// version or resumed stream more than once: HTTP 400 with a JSON-RPC
// error saying which header.
func (x *exchange) repeatedHeader(name string) *extprocv3.ProcessingResponse {
	x.obs.Immediate("repeated_header")
	x.logger().Info().Str("header", name).Msg("refused: header sent more than once")
	return jsonRPCReply(http.StatusBadRequest, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInvalidRequest,
		"invalid request: header "+name+" sent more than once", nil), false, nil)
}

// requestFacts is what the request headers said, read once at the request
// headers; values are converted to strings only for the headers used, and
// those only a plugin call needs only when one is made (ensureContext):
// passthrough allocates little.
type requestFacts struct {
	method    string // POST, GET, DELETE; "" for any other
	path      string
	authority string
	sessionID string
	requestID string
	encoding  string // content-encoding of the request body, "" for identity
	// raw are header values kept as received until a plugin call or a
	// log line needs them (ensureContext).
	raw rawHeaders
	// std are the MCP 2026-07-28 standard headers as received.
	std stdHeaders
	// headers are the request headers, read again only when a body
	// check, a rule or a hook needs them (a POST whose body is read, a
	// GET whose replay is read).
	headers *corev3.HeaderMap
	// envoyMethod is the method Envoy's MCP filter read from the body, ""
	// when not known (caller.go).
	envoyMethod string
	// global is the plugin context's global part: the request, and the
	// caller once known.
	global cpex.GlobalContext
	// forwarded are the headers of extproc.forward_headers, for the pre
	// hooks that carry headers.
	forwarded      map[string]string
	droppedHeaders []dropped // not forwarded to plugins (size, format)
	// logHeaders are the request headers for --log-bodies, sensitive
	// ones redacted; nil unless bodies are logged.
	logHeaders []string
	// scheme is :scheme, for the audience of a delegated token.
	scheme string
}

// readRequestHeaders keeps what the stream needs from the request headers;
// repeated names a header that says which session or stream a request
// belongs to and was sent more than once (repeatedHeader).
func (r *requestFacts) read(h *extprocv3.HttpHeaders, set *config.Extproc) (authority []byte, repeated string) {
	var seen sessionHeaders
	for _, hv := range h.GetHeaders().GetHeaders() {
		k := hv.GetKey()
		switch k {
		case ":method":
			r.method = knownMethod(headerBytes(hv))
		case ":path":
			r.path = headerValue(hv)
		case ":authority":
			authority = headerBytes(hv)
		case ":scheme":
			r.scheme = knownScheme(headerBytes(hv))
		case "x-request-id":
			r.raw.requestID = hv
		case "mcp-session-id":
			r.sessionID = headerValue(hv)
			repeated = seen.add(k, repeated)
		case "last-event-id":
			repeated = seen.add(k, repeated)
		case "content-encoding":
			r.encoding = contentcoding.Normalize(headerValue(hv))
		case "traceparent":
			r.raw.traceparent = hv
		case "tracestate":
			r.raw.tracestate = hv
		case "mcp-protocol-version":
			r.std.add(k, hv)
			repeated = seen.add(k, repeated)
		case "mcp-method", "mcp-name":
			r.std.add(k, hv)
		}
		if r.logHeaders != nil {
			r.logHeaders = append(r.logHeaders, logsafe.Cap(k, logsafe.DefaultCap), logsafe.Cap(redactHeader(k, headerValue(hv)), logsafe.DefaultCap))
		}
		// Configured headers may name any header, the ones above included.
		if k == "" {
			continue
		}
		r.readConfigured(set, k, hv)
	}
	return authority, repeated
}

// knownMethod returns the HTTP method the processor tells apart (POST,
// GET, DELETE) as a constant, without allocating; "" for any other.
func knownMethod(b []byte) string {
	for _, m := range [...]string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		if string(b) == m {
			return m
		}
	}
	return ""
}

// knownScheme returns http or https as a constant, without allocating;
// "" for any other.
func knownScheme(b []byte) string {
	for _, s := range [...]string{"https", "http"} {
		if string(b) == s {
			return s
		}
	}
	return ""
}

// resource is the MCP server's URI as a client names it (RFC 8707's
// resource indicator): scheme, authority and path without the query; ""
// without a scheme or authority.
func (r *requestFacts) resource() string {
	if r.scheme == "" || r.authority == "" {
		return ""
	}
	path, _, _ := strings.Cut(r.path, "?")
	return r.scheme + "://" + r.authority + path
}

// sessionHeaders counts the request headers that name the request's MCP
// session, protocol version and resumed stream. Sent twice, the sidecar
// and the server may each believe another copy (the Go SDK serves the
// first Mcp-Session-Id, Envoy's last would be recorded): the request's
// ids would be recorded, or a replay looked up, in a session the server
// does not serve.
type sessionHeaders struct{ session, version, lastEvent uint8 }

// add counts header k and returns the name of the first header seen twice
// (repeated, or k).
func (s *sessionHeaders) add(k, repeated string) string {
	n := &s.session
	switch k {
	case "mcp-protocol-version":
		n = &s.version
	case "last-event-id":
		n = &s.lastEvent
	}
	if *n++; *n == 2 && repeated == "" {
		return k
	}
	return repeated
}

// readConfigured keeps a header the configuration names for the plugin
// context or the forwarded headers, when it is within
// MaxForwardedHeaderBytes.
func (r *requestFacts) readConfigured(set *config.Extproc, k string, hv *corev3.HeaderValue) {
	user, tenant, server, fwd := k == set.UserHeader, k == set.TenantHeader, k == set.ServerHeader, forwardHeader(set.ForwardHeaders, k)
	if !user && !tenant && !server && !fwd {
		return
	}
	v, ok := r.boundedValue(k, headerValue(hv), MaxForwardedHeaderBytes)
	if !ok {
		return
	}
	if user {
		r.global.User = userJSON(v)
	}
	if tenant {
		r.global.TenantID = v
	}
	if server {
		r.global.ServerID = v
	}
	if fwd {
		if r.forwarded == nil {
			r.forwarded = make(map[string]string)
		}
		r.forwarded[k] = v
	}
}

// stdHeaders are the MCP 2026-07-28 standard headers of a request, as
// received. A header sent more than once is not trusted. The values stay
// in the received message, converted only when the request is decided
// from them.
type stdHeaders struct {
	version, method, name    *corev3.HeaderValue
	nVersion, nMethod, nName uint8
	// all are mcp-method, mcp-name, mcp-protocol-version and mcp-param-*
	// as a body check reads them (standard), nil for a request of an
	// older client; read once.
	all  []mcpheaders.Header
	read bool
}

func (s *stdHeaders) add(k string, hv *corev3.HeaderValue) {
	switch k {
	case "mcp-protocol-version":
		s.version, s.nVersion = hv, s.nVersion+1
	case "mcp-method":
		s.method, s.nMethod = hv, s.nMethod+1
	case "mcp-name":
		s.name, s.nName = hv, s.nName+1
	}
}

// declaredMethod returns the method trusted MCP 2026-07-28 headers name;
// decided is false when the request cannot be decided from its headers
// (trust off, an earlier version, a header missing or repeated).
func (r *requestFacts) declaredMethod(set *config.Extproc) (method string, decided bool) {
	s := &r.std
	if !set.TrustsMCPMethodHeader() || s.nVersion != 1 || s.nMethod != 1 ||
		!mcpheaders.StandardHeaders(string(headerBytes(s.version))) {
		return "", false
	}
	return string(headerBytes(s.method)), true
}

// knownMethod returns the request's MCP method as far as it is known
// before its body: trusted headers, else Envoy's MCP filter; "" when
// neither says.
func (r *requestFacts) knownMCPMethod(set *config.Extproc) string {
	if method, decided := r.declaredMethod(set); decided {
		return method
	}
	return r.envoyMethod
}

// declared returns what trusted MCP 2026-07-28 headers say: decided is
// false when the request cannot be decided from its headers (trust off, an
// earlier version, a header missing, repeated or undecodable); else route
// is the method's row (nil when no hook family has the method) and name
// the target named by Mcp-Name.
func (r *requestFacts) declared(set *config.Extproc) (route *hookfamily.Route, name string, decided bool) {
	method, decided := r.declaredMethod(set)
	if !decided {
		return nil, "", false
	}
	route, ok := hookfamily.ByMethod(method)
	if !ok {
		return nil, "", true
	}
	if route.TargetParam == "" {
		return route, "", true
	}
	if r.std.nName != 1 {
		return nil, "", false
	}
	name, err := mcpheaders.Decode(headerValue(r.std.name))
	if err != nil {
		return nil, "", false
	}
	return route, name, true
}

// standard returns the request headers mcp-method, mcp-name,
// mcp-protocol-version and mcp-param-*, read once from the headers message
// when a body check first needs them, and nil when the request has none of
// them and declares no version with standard headers: a request of an
// older client allocates nothing here.
func (r *requestFacts) standard() []mcpheaders.Header {
	s := &r.std
	if s.read {
		return s.all
	}
	s.read = true
	hs := r.headers.GetHeaders()
	need := false
	for _, hv := range hs {
		switch k := hv.GetKey(); {
		case isStandardHeader(k):
			need = true
		case k == "mcp-protocol-version":
			need = need || mcpheaders.StandardHeaders(string(hv.GetRawValue()))
		}
	}
	if !need {
		return nil
	}
	for _, hv := range hs {
		if k := hv.GetKey(); isStandardHeader(k) || k == "mcp-protocol-version" {
			s.all = append(s.all, mcpheaders.Header{Name: k, Value: headerValue(hv)})
		}
	}
	return s.all
}

func isStandardHeader(k string) bool {
	return k == "mcp-method" || k == "mcp-name" || strings.HasPrefix(k, "mcp-param-")
}

// sent reports whether the request has header k.
func (r *requestFacts) sent(k string) bool { return findHeader(r.headers, k) != nil }

// bearerToken returns the caller's bearer token ("" when there is none).
func (r *requestFacts) bearerToken() string {
	if scheme, tok, ok := strings.Cut(headerValue(findHeader(r.headers, "authorization")), " "); ok && strings.EqualFold(scheme, "bearer") {
		return strings.TrimSpace(tok)
	}
	return ""
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

// redactHeader hides the value of credential headers in --log-bodies logs.
func redactHeader(k, v string) string {
	if config.IsCredentialHeader(k) {
		return "[redacted]"
	}
	return v
}

// headerBytes returns a header's value without copying it (Envoy sends
// raw_value; value only from older senders).
func headerBytes(hv *corev3.HeaderValue) []byte {
	if hv == nil {
		return nil
	}
	if raw := hv.GetRawValue(); len(raw) > 0 {
		return raw
	}
	return []byte(hv.GetValue())
}

// findHeader returns the first header named name (lower case) in hm, or
// nil.
func findHeader(hm *corev3.HeaderMap, name string) *corev3.HeaderValue {
	for _, hv := range hm.GetHeaders() {
		if hv.GetKey() == name {
			return hv
		}
	}
	return nil
}

func headerValue(hv *corev3.HeaderValue) string {
	if raw := hv.GetRawValue(); len(raw) > 0 {
		return string(raw)
	}
	return hv.GetValue()
}

// userJSON keeps a user header as a JSON string for the plugin context.
func userJSON(v string) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func forwardHeader(list []string, key string) bool {
	for _, h := range list {
		if h == key {
			return true
		}
	}
	return false
}
