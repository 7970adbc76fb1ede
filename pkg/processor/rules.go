package processor

import (
	"maps"
	"net/http"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/audit"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
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

// checkRules applies the rules to one message, a request or notification;
// it returns the refusal when one denies it. checkMessage calls it only
// when there are rules.
func (b *bodyInspection) checkRules(i int, m *mcpmsg.Message) (refusal, bool) {
	x := b.x
	set := x.snap.Rules
	in := x.ruleInput(m.Method)
	in.Name, in.Arguments = messageTarget(m)
	start := time.Now()
	v := set.Check(in)
	if v.Rule == nil && m.Params != nil {
		// A request that names a prompt or resource without using it
		// (completion/complete, resources/subscribe) is denied what the
		// rules hide of that item from this caller's lists.
		if callMethod, name, ok := mcplist.Referenced(m.Method, m.Params); ok {
			v.Rule, _ = x.lister(callMethod).Hidden(name)
			in.Name = name
		}
	}
	x.obs.RuleEvaluation("request", time.Since(start))
	for _, r := range v.WouldDeny { // rules in mode shadow
		x.obs.RuleDecision(r.Name, "would_deny", 1)
		b.record(m, &refusal{by: r.Name, byKind: byRule, denied: true, message: "would be denied by rule " + r.Name}, true)
		x.trail.rule(b.event, r.Name, true)
		x.logger().Info().Str("rule", r.Name).Str("method", logsafe.Cap(m.Method, logsafe.DefaultCap)).Str("target", logsafe.Cap(in.Name, logsafe.DefaultCap)).Msg("shadow: rule would have blocked")
	}
	if v.Rule == nil {
		return refusal{}, false
	}
	r := v.Rule
	x.trail.rule(b.event, r.Name, false)
	x.obs.RuleDecision(r.Name, "deny", 1)
	log := x.logger()
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

// ruleInput is what the rules read of this request, for method.
func (x *exchange) ruleInput(method string) *rules.Input {
	c := &x.ruleHeaders
	if c.fn == nil {
		c.fn = x.ruleHeaderMap // a method value allocates: once
	}
	in := &rules.Input{Method: method, Path: x.req.path, ServerID: x.req.global.ServerID, Headers: c.fn}
	if id := x.caller.id; id != nil {
		in.User, in.Tenant, in.Roles, in.Teams = id.User, id.Tenant, id.Roles, id.Teams
		if id.Claims != nil {
			in.Claims = x.callerClaims
		}
	}
	return in
}

// ruleHeaderCache is the request's headers as the rules read them, built on
// first use, and the function that returns them, made once.
type ruleHeaderCache struct {
	m  map[string]string
	fn func() map[string]string
}

// ruleHeaderMap is request.headers: the request's headers as the HTTP hooks
// get them (requestHeaderMap) without, unless allow_credential_headers,
// the credentials. It is built once per exchange, on first use: the
// request's check and the filter of its list read the same headers, and
// the rules only read the map.
func (x *exchange) ruleHeaderMap() map[string]string {
	if m := x.ruleHeaders.m; m != nil {
		return m
	}
	out := requestHeaderMap(x.req.headers)
	if !x.snap.Settings.AllowCredentialHeaders {
		maps.DeleteFunc(out, func(k, _ string) bool { return config.IsCredentialHeader(k) })
	}
	x.ruleHeaders.m = out
	return out
}

// filtersLists reports whether the rules may hide items of the list
// method from this caller, judged with the item's name and arguments
// unknown: a list's answer is read only then.
func (x *exchange) filtersLists(method string) bool {
	l, ok := mcplist.ByMethod(method)
	return ok && x.snap.Rules.MayHide(x.ruleInput(l.CallMethod))
}

// filterList drops the items of a list result that the rules hide, and
// returns the message that replaces it, or nil when nothing is hidden. A
// result that cannot be read is refused: nothing hidden may pass.
func (rd reader) filterList(m *mcpmsg.Message, a *awaited) []byte {
	x := rd.x
	x.trail.result(a.event, m.Result)
	out := rd.filter(m, a.list)
	if out == nil {
		return nil
	}
	shadow := x.shadow()
	x.trail.changed(a.event, byRule, "", shadow, audit.PhaseResponse)
	if shadow {
		// Under extproc.shadow a list goes on as the server sent it.
		x.obs.Shadowed("list", a.list.Method, string(audit.DecisionWouldModify))
		return nil
	}
	return out
}

// filter is filterList's work: the list without what pinning and the
// rules hide and list hooks drop, or the error replacing it; nil when it
// goes on unchanged.
func (rd reader) filter(m *mcpmsg.Message, l *mcplist.List) []byte {
	x := rd.x
	pinHidden, refused := rd.pinnedItems(m, l) // pinning.go
	if refused != nil {
		return refused
	}
	start := time.Now()
	lister := x.lister(l.CallMethod)
	hideLabel := "hide"
	if x.shadow() {
		hideLabel = "would_hide" // filterList passes the list whole
	}
	// One variable for what the callback changes: the first rule that
	// hid an item, and the item's index (one allocation, not two).
	at := struct {
		first string
		index int
	}{index: -1}
	hide := func(name string) bool {
		at.index++
		if pinHidden[at.index] {
			return true
		}
		r, hidden := lister.Hidden(name)
		if hidden {
			x.obs.RuleDecision(r.Name, hideLabel, 1)
			if at.first == "" {
				at.first = r.Name
			}
		}
		return hidden
	}
	e, err := rd.edit(m, l, hide)
	x.obs.RuleEvaluation("list", time.Since(start))
	switch {
	case e.refused != nil:
		return e.refused
	case err != nil:
		x.logger().Warn().Err(err).Str("method", l.Method).Msg("refused: list result cannot be filtered by the rules")
		return mcpmsg.ErrorResponse(m.ID, mcpmsg.CodeInternalError, l.Method+" result cannot be filtered by the rules: "+err.Error(), nil)
	case e.hidden == 0 && (e.private || e.dropped > 0):
		return e.msg
	case e.hidden == 0:
		return nil
	}
	if !x.shadow() { // under shadow the list goes on whole (filterList)
		x.decision.raise(decisionModified, at.first, byRule, "")
	}
	x.logger().Debug().Str("method", l.Method).Int("hidden", e.hidden).Msg("list filtered by rules")
	return e.msg
}

// listEdit is what edit made of a list result.
type listEdit struct {
	// msg is the message that replaces the list's (its Raw itself when
	// nothing changed).
	msg []byte
	// hidden is the items the rules and pinning hid, dropped those the
	// list hooks dropped.
	hidden, dropped int
	// private: a cache scope was made private.
	private bool
	// refused is the JSON-RPC error a list hook answered with.
	refused []byte
}

// edit applies hide and the list hooks to m's result and makes its cache
// scope private: the rules may hide items from this caller, so the list
// is its view (whole or not), never a shared-cache hint (MCP 2026-07-28).
//
// Without list hooks this is one pass over the result Parse validated
// (none when ParseList indexed it: only the kept items are copied),
// building one buffer: the message as it goes out.
func (rd reader) edit(m *mcpmsg.Message, l *mcplist.List, hide func(string) bool) (listEdit, error) {
	if start, end, ok := m.ResultSpan(); ok && !rd.x.snap.Hooks.Applies(l.Hook) {
		x := rd.x
		ix, _ := m.ListIndex() // nil: EditValid reads the result
		out, ed, err := l.EditValid(m.Raw, start, end, mcplist.Edit{Hide: hide, Private: true, Buf: x.body.lend(), Index: ix})
		if err != nil || (ed.Dropped == 0 && !ed.Scoped) {
			x.body.keep(nil) // out is m.Raw, or nothing
		} else {
			x.body.keep(out) // the reply carries it until sent
		}
		return listEdit{msg: out, hidden: ed.Dropped, private: ed.Scoped}, err
	}
	result, n, err := l.Filter(m.Result, hide)
	if err != nil {
		return listEdit{}, err
	}
	e := listEdit{hidden: n}
	if result, e.dropped, e.refused = rd.listHook(m, l, result); e.refused != nil { // listhooks.go
		return e, nil
	}
	if result, e.private, err = mcplist.PrivateCacheScope(result); err != nil {
		return listEdit{}, err
	}
	if n > 0 || e.dropped > 0 || e.private {
		// The filter removed whole items from the result Parse validated,
		// or changed a string for another.
		e.msg, err = mcpmsg.ReplaceValidResult(*m, result)
	}
	return e, err
}

// lister returns the stream's lister for a call method, made on first use.
func (x *exchange) lister(callMethod string) *rules.Lister {
	if l, ok := x.caller.listers[callMethod]; ok {
		return l
	}
	if x.caller.listers == nil {
		x.caller.listers = make(map[string]*rules.Lister, 1)
	}
	l := x.snap.Rules.Lister(x.ruleInput(callMethod))
	x.caller.listers[callMethod] = l
	return l
}
