package processor

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpheaders"
)

// What an MCP POST costs is decided at request headers: each ext_proc
// message is a round trip through Envoy, so the request body is asked for
// only when a hook may run on it, and the response headers only when a post
// hook may run on the answer (docs/extproc-contract.md §3.1: SKIP in the
// request-headers reply suppresses them).
//
// MCP 2026-07-28 names the method (Mcp-Method) and the target (Mcp-Name) in
// headers, and a conforming server refuses a request whose headers disagree
// with its body (docs/mcp-result-paths.md §4). With
// extproc.trust_mcp_method_header (the default), a request declaring that
// version is decided from its headers: no body at all when no hook applies
// to its method, or when no plugin's conditions select its target. When the
// body is read anyway, the body path checks the headers against it.
//
// Whether a hook applies is asked of Hooks on every request, not frozen per
// configuration: the executor caches its plan per plugin generation, and
// plugins can be disabled at run time (on_error: disable) or change with a
// reload of their server's config.

// stdHeaders are the MCP 2026-07-28 standard headers of a request, as
// received. A header sent more than once is not trusted.
// The values stay in the received message, converted only when the request
// is decided from them.
type stdHeaders struct {
	version, method, name    *corev3.HeaderValue
	nVersion, nMethod, nName uint8
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

// askForBody answers the request headers of an MCP POST with a body.
func (st *stream) askForBody() *extprocv3.ProcessingResponse {
	body, post := st.needs()
	switch {
	case !body:
		return st.passThrough()
	case !post:
		st.phase = phaseRequestBody
		st.obs.ModeOverride("request_buffered_only")
		return st.canned.inspectRequestOnly
	default:
		st.phase = phaseRequestBody
		st.obs.ModeOverride("request_buffered")
		return st.canned.inspectRequest
	}
}

// needs reports whether the request body must be read, and whether a post
// hook may apply to the answer (so the response headers are needed).
func (st *stream) needs() (body, post bool) {
	body, post = st.hooksNeed()
	if st.snap.Rules.Len() > 0 {
		// Rules read every request (rules.go), and a list's answer when
		// they may hide some of it from this caller.
		body, post = true, post || st.listsNeedAnswer()
	}
	if st.listHooksNeedAnswer() {
		body, post = true, true // listhooks.go
	}
	if st.snap.Pins != nil {
		// Pinning reads every request (a call of a changed definition is
		// refused) and every pinned list's answer (pinning.go).
		body, post = true, post || st.pinsNeedAnswer()
	}
	// The requests of a read body in a session no server accepted yet are
	// recorded when the answer says it does (commitRecords).
	return body, post || (body && st.awaitsAcceptance())
}

// listsNeedAnswer reports whether the answer must be read for the rules
// to filter a list. When the headers do not name the method, the body may
// hold a list: the answer's headers are asked for (one ext_proc message;
// judging every rule for the caller here would cost as much), and its body
// read only if a list was there. When MCP 2026-07-28 headers name a list,
// only if the rules may hide some of it from this caller.
func (st *stream) listsNeedAnswer() bool {
	method, decided := st.declaredMethod()
	if !decided {
		if st.envoyMethod == "" {
			return true
		}
		method = st.envoyMethod // Envoy read it from the body (mcpfilter.go)
	}
	return st.filtersLists(method)
}

// hooksNeed is needs for the plugin hooks.
func (st *stream) hooksNeed() (body, post bool) {
	r, name, decided := st.declared()
	if !decided {
		if st.envoyMethod != "" { // Envoy read it from the body (mcpfilter.go)
			r, _ := hookfamily.ByMethod(st.envoyMethod)
			return true, st.postApplies(r)
		}
		return true, st.postConfigured()
	}
	if st.checksPermission(string(headerBytes(st.std.method))) {
		return true, st.postApplies(r)
	}
	if r == nil {
		return false, false // no hook family has this method
	}
	h := st.snap.Hooks
	if r.TargetParam == "" {
		// The target is not in the request (it is learned from an earlier
		// one): conditions cannot be evaluated here.
		return true, st.postApplies(r)
	}
	t := hookfamily.Target{Family: r.Family, Name: name}
	if r.Pre && h.AppliesTo(r.Family.Pre, &st.global, t) {
		return true, st.postApplies(r)
	}
	post = r.Post && h.AppliesTo(r.Family.Post, &st.global, t)
	return post, post
}

// postApplies reports whether a post hook may apply to the answer of a
// request of route r (nil: no hook family has its method), its target
// unknown.
func (st *stream) postApplies(r *hookfamily.Route) bool {
	return r != nil && r.Post && st.snap.Hooks.Applies(r.Family.Post)
}

// declaredMethod returns the method trusted MCP 2026-07-28 headers name;
// decided is false when the request cannot be decided from its headers
// (trust off, an earlier version, a header missing or repeated).
func (st *stream) declaredMethod() (method string, decided bool) {
	s := &st.std
	if !st.snap.Settings.TrustsMCPMethodHeader() || s.nVersion != 1 || s.nMethod != 1 ||
		!mcpheaders.StandardHeaders(string(headerBytes(s.version))) {
		return "", false
	}
	return string(headerBytes(s.method)), true
}

// declared returns what trusted MCP 2026-07-28 headers say: decided is
// false when the request cannot be decided from its headers (trust off, an
// earlier version, a header missing, repeated or undecodable); else r is
// the method's route (nil when no hook family has the method) and name the
// target named by Mcp-Name.
func (st *stream) declared() (r *hookfamily.Route, name string, decided bool) {
	method, decided := st.declaredMethod()
	if !decided {
		return nil, "", false
	}
	s := &st.std
	r, ok := hookfamily.ByMethod(method)
	if !ok {
		return nil, "", true
	}
	if r.TargetParam == "" {
		return r, "", true
	}
	if s.nName != 1 {
		return nil, "", false
	}
	name, err := mcpheaders.Decode(headerValue(s.name))
	if err != nil {
		return nil, "", false
	}
	return r, name, true
}
