package processor

import (
	"maps"
	"net/http"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcplist"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
	"github.com/mcp-extproc/mcp-extproc/pkg/rules"
)

// extproc.rules (docs/rules.md) are checked in process on every JSON-RPC
// request and notification of a body, before any hook of the message: the
// first rule whose deny holds refuses it, as a plugin block does (HTTP 200,
// a JSON-RPC error with the request's id naming the rule). A rule that
// fails at run time denies.
//
// The same rules filter list results: an item of tools/list, prompts/list,
// resources/list or resources/templates/list is dropped when a rule denies
// its call (tools/call of that name, ...) with the arguments unknown, on
// every path a result takes (JSON, SSE, a GET replay). With rules, every
// MCP POST body is read, and the response of a request that may be a list
// is read when the rules may hide something from this caller.

// checkRules applies the rules to one message; it returns the refusal when
// one denies it.
func (st *stream) checkRules(i int, m *mcpmsg.Message) (refusal, bool) {
	set := st.snap.Rules
	if set.Len() == 0 || (m.Kind != mcpmsg.KindRequest && m.Kind != mcpmsg.KindNotification) {
		return refusal{}, false
	}
	in := st.ruleInput(m.Method)
	in.Name, in.Arguments = ruleTarget(m)
	start := time.Now()
	v := set.Check(in)
	if v.Rule == nil && m.Params != nil {
		// A request that names a prompt or resource without using it
		// (completion/complete, resources/subscribe) is denied what the
		// rules hide of that item from this caller's lists.
		if callMethod, name, ok := mcplist.Referenced(m.Method, m.Params); ok {
			v.Rule, _ = st.lister(callMethod).Hidden(name)
			in.Name = name
		}
	}
	st.obs.RuleEvaluation("request", time.Since(start))
	if v.Rule == nil {
		return refusal{}, false
	}
	r := v.Rule
	st.obs.RuleDecision(r.Name, "deny", 1)
	log := st.logger()
	ev := log.Info()
	if v.Err != nil {
		ev = log.Warn().Str("error", logsafe.Cap(v.Err.Error(), logsafe.DefaultCap))
	}
	ev.Str("rule", r.Name).Str("method", logsafe.Cap(m.Method, logsafe.DefaultCap)).Str("target", logsafe.Cap(in.Name, logsafe.DefaultCap)).Msg("blocked by rule")
	msg := r.Message
	if msg == "" {
		msg = "denied by rule " + r.Name
	}
	data := map[string]any{"rule": r.Name}
	if v.Err != nil {
		data["error"] = "the rule failed to evaluate, which denies"
	}
	return refusal{index: i, id: m.ID, code: -32000, status: http.StatusOK, reason: "blocked", denied: true,
		message: msg, data: data, by: r.Name, byKind: byRule}, true
}

// ruleTarget returns what a rule sees as mcp.name and mcp.arguments: the
// target and arguments of the method's route (hookfamily), none for a
// method whose request does not name one.
func ruleTarget(m *mcpmsg.Message) (name string, args []byte) {
	r, ok := hookfamily.ByMethod(m.Method)
	if !ok || r.TargetParam == "" {
		return "", nil
	}
	if r.ArgsParam != "" {
		args = m.Arguments
	}
	return targetName(r, m), args
}

// ruleInput is what the rules read of this request, for method.
func (st *stream) ruleInput(method string) *rules.Input {
	in := &rules.Input{Method: method, Path: st.path, ServerID: st.global.ServerID, Headers: st.ruleHeaders}
	if id := st.caller; id != nil {
		in.User, in.Tenant, in.Roles, in.Teams = id.User, id.Tenant, id.Roles, id.Teams
		if id.Claims != nil {
			in.Claims = st.callerClaims
		}
	}
	return in
}

// ruleHeaders is request.headers: the request's headers as the HTTP hooks
// get them (requestHeaderMap) without, unless allow_credential_headers,
// the credentials.
func (st *stream) ruleHeaders() map[string]string {
	out := requestHeaderMap(st.headers)
	if !st.snap.Settings.AllowCredentialHeaders {
		maps.DeleteFunc(out, func(k, _ string) bool { return config.IsCredentialHeader(k) })
	}
	return out
}

// listRequest makes the answer of a list request pending, so the rules
// filter its result.
func (st *stream) listRequest(m *mcpmsg.Message) {
	if m.Kind != mcpmsg.KindRequest || !st.readsList(m.Method) {
		return
	}
	l, _ := mcplist.ByMethod(m.Method)
	st.await(m.ID, &pendingCall{list: l})
}

// readsList reports whether the answer of a list method is read: the
// rules filter it, or its definitions are pinned (pinning.go).
func (st *stream) readsList(method string) bool {
	l, ok := mcplist.ByMethod(method)
	if !ok {
		return false
	}
	return st.snap.Rules.Len() > 0 || st.pinsList(method) || st.listHookApplies(l)
}

// filtersLists reports whether the rules may hide items of the list
// method from this caller, judged with the item's name and arguments
// unknown: a list's answer is read only then.
func (st *stream) filtersLists(method string) bool {
	l, ok := mcplist.ByMethod(method)
	return ok && st.snap.Rules.MayHide(st.ruleInput(l.CallMethod))
}

// filterList drops the items of a list result that the rules hide, and
// returns the message that replaces it, or nil when nothing is hidden. A
// result that cannot be read is refused: nothing hidden may pass.
func (st *stream) filterList(m *mcpmsg.Message, l *mcplist.List) []byte {
	pinHidden, refused := st.pinnedItems(m, l) // pinning.go
	if refused != nil {
		return refused
	}
	start := time.Now()
	lister := st.lister(l.CallMethod)
	// One variable for what the callback changes: the first rule that
	// hid an item, and the item's index (one allocation, not two).
	at := struct {
		first string
		index int
	}{index: -1}
	out, n, err := l.Filter(m.Result, func(name string) bool {
		at.index++
		if pinHidden[at.index] {
			return true
		}
		r, hidden := lister.Hidden(name)
		if hidden {
			st.obs.RuleDecision(r.Name, "hide", 1)
			if at.first == "" {
				at.first = r.Name
			}
		}
		return hidden
	})
	first := at.first
	st.obs.RuleEvaluation("list", time.Since(start))
	dropped := 0
	if err == nil {
		var refused []byte
		if out, dropped, refused = st.listHook(m, l, out); refused != nil { // listhooks.go
			return refused
		}
	}
	// The rules may hide items from this caller, so the list is its view
	// (whole or not): never a shared-cache hint (MCP 2026-07-28).
	private := false
	if err == nil {
		out, private, err = mcplist.PrivateCacheScope(out)
	}
	if err == nil && (n > 0 || dropped > 0 || private) {
		// The filter removed whole items from the result Parse validated,
		// or changed a string for another.
		out, err = mcpmsg.ReplaceValidResult(*m, out)
	}
	if err != nil {
		st.logger().Warn().Err(err).Str("method", l.Method).Msg("refused: list result cannot be filtered by the rules")
		return mcpmsg.ErrorResponse(m.ID, mcpmsg.CodeInternalError, l.Method+" result cannot be filtered by the rules: "+err.Error(), nil)
	}
	if n == 0 {
		if private || dropped > 0 {
			return out
		}
		return nil
	}
	st.decision.raise(decisionModified, first, byRule, "")
	st.logger().Debug().Str("method", l.Method).Int("hidden", n).Msg("list filtered by rules")
	return out
}

// lister returns the stream's lister for a call method, made on first use.
func (st *stream) lister(callMethod string) *rules.Lister {
	if l, ok := st.listers[callMethod]; ok {
		return l
	}
	if st.listers == nil {
		st.listers = make(map[string]*rules.Lister, 1)
	}
	l := st.snap.Rules.Lister(st.ruleInput(callMethod))
	st.listers[callMethod] = l
	return l
}
