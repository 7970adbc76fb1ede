package processor

import (
	"net/http"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
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
// older requests (mcpfilter.go).
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
	if refused := x.http.beforeMCP(h, &envoy); refused != nil {
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
	resp := withSetHeaders(x.planned(p), (*extprocv3.ProcessingResponse).GetRequestHeaders, x.http.headerSets)
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
	case r.method == http.MethodPost && !pl.anyHook():
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
		p.answer, p.why = true, p.why+"; http_post_request"
	}
	return p
}

// anyHook reports whether anything acts on an MCP POST's body: a hook of a
// family or one that runs per MCP message (http_auth_check_permission,
// token_delegate), a list hook, rules or pinning.
func (pl planner) anyHook() bool {
	x := pl.x
	snap := x.snap
	if snap.Rules.Len() > 0 || snap.Pins != nil {
		return true
	}
	for h, when := range cpex.Dispatched() {
		if when >= cpex.PerMessage && snap.Hooks.Applies(h) {
			return true
		}
	}
	return false
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
		if m := x.req.envoyMethod; m != "" { // Envoy read it from the body (mcpfilter.go)
			route, _ := hookfamily.ByMethod(m)
			return plan{body: true, answer: postApplies(hooks, route), why: "the method Envoy's MCP filter read"}
		}
		return plan{body: true, answer: x.results.postConfigured(), why: "the method is known only from the body"}
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
	hooks := x.snap.Hooks
	op, ok := hookfamily.Operation(method)
	if !ok {
		return false
	}
	return (op.Delegated && hooks.Applies(cpex.TokenDelegate)) ||
		(op.Permission != "" && hooks.Applies(cpex.HTTPAuthCheckPermission))
}

// listHookNeeds reports whether a list hook may apply to the answer of a
// request of method ("" when not known before the body: any list).
func (pl planner) listHookNeeds(method string) bool {
	x := pl.x
	if method != "" {
		l, ok := mcplist.ByMethod(method)
		return ok && listHookApplies(x.snap.Hooks, l)
	}
	for l := range mcplist.All() {
		if listHookApplies(x.snap.Hooks, l) {
			return true
		}
	}
	return false
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
