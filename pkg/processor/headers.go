package processor

import (
	"net/http"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpheaders"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// The standard headers of MCP 2026-07-28 (docs/mcp-result-paths.md §4):
// Mcp-Method and Mcp-Name repeat the body's method and target, and each
// Mcp-Param-<H> repeats a tool argument. A server that routes or authorizes
// on them must see what the body says, before and after the plugins.

// standardHeaders returns the request headers mcp-method, mcp-name,
// mcp-protocol-version and mcp-param-*, read once from the headers message
// when a body check first needs them, and nil when the request has none of
// them and declares no version with standard headers: a request of an
// older client allocates nothing here.
func (st *stream) standardHeaders() []mcpheaders.Header {
	if st.mcpRead {
		return st.mcpHeaders
	}
	st.mcpRead = true
	hs := st.headers.GetHeaders()
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
			st.mcpHeaders = append(st.mcpHeaders, mcpheaders.Header{Name: k, Value: headerValue(hv)})
		}
	}
	return st.mcpHeaders
}

func isStandardHeader(k string) bool {
	return k == "mcp-method" || k == "mcp-name" || strings.HasPrefix(k, "mcp-param-")
}

// checkStandardHeaders refuses a single-message body whose Mcp-Method or
// Mcp-Name disagree with it (or lack one its declared protocol version
// requires), as a conforming server would: HTTP 400 and JSON-RPC -32020
// with the request's id. It defends servers that do not check.
func (st *stream) checkStandardHeaders(msgs *mcpmsg.Body) *extprocv3.ProcessingResponse {
	if msgs.Batch || len(msgs.Messages) != 1 || len(st.standardHeaders()) == 0 {
		return nil
	}
	m := &msgs.Messages[0]
	if m.Kind != mcpmsg.KindRequest && m.Kind != mcpmsg.KindNotification {
		return nil
	}
	name := m.Name
	if m.Method == "resources/read" {
		name = m.URI
	}
	// Check returns nil or a *MismatchError (no errors.As: the request
	// path allocates nothing it does not use).
	mm, ok := mcpheaders.Check(st.mcpHeaders, m.Method, name).(*mcpheaders.MismatchError)
	if !ok {
		return nil
	}
	st.obs.Immediate("header_mismatch")
	st.logger().Info().Str("header", mm.Header).Str("method", m.Method).Msg("refused: standard header disagrees with the body")
	return jsonRPCReply(http.StatusBadRequest, mcpmsg.ErrorResponse(m.ID, mcpheaders.CodeHeaderMismatch, mm.Error(), nil), false, nil)
}

// checkDeclaredMethod refuses, at the request headers, a request whose
// trusted Mcp-Method is not the method Envoy's MCP filter read from its
// body: HTTP 400 and JSON-RPC -32020, as a conforming server would. It
// matters where the body is not read on the header's word (no hook for
// the declared method): a tools/call declared as a ping must not pass
// because the server is trusted to notice. Without Envoy's MCP filter the
// sidecar cannot tell before the body; trust_mcp_method_header: false has
// every body read and checked (checkStandardHeaders).
func (st *stream) checkDeclaredMethod() *extprocv3.ProcessingResponse {
	if st.envoyMethod == "" {
		return nil
	}
	method, decided := st.declaredMethod()
	if !decided || method == st.envoyMethod {
		return nil
	}
	st.obs.Immediate("header_mismatch")
	st.logger().Info().Str("header", "mcp-method").Str("envoy_method", st.envoyMethod).Msg("refused: Mcp-Method disagrees with the body Envoy's MCP filter read")
	return jsonRPCReply(http.StatusBadRequest, mcpmsg.ErrorResponse(nil, mcpheaders.CodeHeaderMismatch,
		"header mismatch: Mcp-Method header value does not match the body's method", nil), false, nil)
}

// mirrorHeaders makes Mcp-Name and the Mcp-Param-* headers of a request a
// pre hook rewrote carry the new values. A header whose value cannot be
// rebuilt for sure is removed, or the request refused
// (uncertain_mirrored_headers: refuse): a header never keeps what a plugin
// removed from the body. The mirrors win over headers a plugin set.
func (st *stream) mirrorHeaders(i int, m *mcpmsg.Message, route *hookfamily.Route, edit *hookfamily.PreEdit, ed *requestEdits) (refusal, bool) {
	if len(st.standardHeaders()) == 0 {
		return refusal{}, false
	}
	newArgs := m.Arguments
	if a, ok := edit.Params[route.ArgsParam]; ok && route.ArgsParam != "" {
		newArgs = a
	}
	plan := mcpheaders.Mirror(st.mcpHeaders, mcpheaders.Rewrite{
		Method: m.Method, OrigName: targetName(route, m), NewName: edit.Name,
		OrigArgs: m.Arguments, NewArgs: newArgs,
	})
	if len(plan.Uncertain) > 0 && st.snap.Settings.RefusesUncertainMirror() {
		st.logger().Info().Strs("headers", plan.Uncertain).Msg("refused: a rewritten argument's header mirror cannot be rebuilt")
		return refusal{index: i, id: m.ID, code: mcpmsg.CodeInternalError, status: http.StatusOK, reason: "header_mirror",
			message: "a plugin rewrote an argument mirrored in " + strings.Join(plan.Uncertain, ", ") + ", which cannot be rebuilt; request refused"}, true
	}
	for _, h := range plan.Set {
		if ed.headers == nil {
			ed.headers = make(map[string]string)
		}
		ed.headers[h.Name] = h.Value
	}
	for _, name := range plan.Remove {
		delete(ed.headers, name)
		ed.remove = append(ed.remove, name)
	}
	return refusal{}, false
}
