package processor

import (
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcplist"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// The list hooks (tools_post_list, prompts_post_list, resources_post_list;
// mcplist.List.Hook): a plugin that declares one is given every list
// result of its kind, on every path a list takes (JSON, SSE, each page, a
// GET replay), after pinning and the rules filtered it. Its payload is the
// list result object as it would reach the client ({"tools": [...],
// "nextCursor": ...}). A plugin may drop items (a modified payload: every
// item it no longer lists, by name, is dropped from the result; it cannot
// add or change one) or refuse the list (a violation: the client gets the
// JSON-RPC error). A plugin without the hook is never asked.

// listHook runs list l's hook on result (the result of m after the rules
// and pinning) and returns what to send: result itself when no plugin
// dropped anything, the result without the items plugins dropped, or
// refused, the error replacing the list.
func (rd reader) listHook(m *mcpmsg.Message, l *mcplist.List, result []byte) (out []byte, dropped int, refused []byte) {
	x := rd.x
	hook := l.Hook
	if !x.snap.Hooks.Applies(hook) {
		return result, 0, nil
	}
	x.ensureContext()
	o := x.runHook(-1, hook, result, executor.NewRequestContext(x.req.global), executor.Target{})
	if r, blocked := x.refusalOf(o, 0, m.ID, hook); blocked {
		x.decision.raise(decisionBlocked, r.by, r.byKind, r.violation)
		return nil, 0, r.errorResponse()
	}
	if !o.Modified {
		return result, 0, nil
	}
	kept := map[string]bool{}
	if _, _, err := l.Filter(o.Payload, func(name string) bool {
		kept[name] = true
		return false
	}); err != nil {
		x.logger().Warn().Err(err).Str("hook", string(hook)).Msg("refused: a list hook's modified payload cannot be read")
		return nil, 0, mcpmsg.ErrorResponse(m.ID, mcpmsg.CodeInternalError, string(hook)+": plugin returned an unusable list: "+err.Error(), nil)
	}
	out, dropped, err := l.Filter(result, func(name string) bool { return !kept[name] })
	if err != nil { // result was filtered before: cannot happen
		return nil, 0, mcpmsg.ErrorResponse(m.ID, mcpmsg.CodeInternalError, l.Method+" result cannot be filtered: "+err.Error(), nil)
	}
	if dropped > 0 {
		x.decision.raise(decisionModified, "", byPlugin, "")
		x.logger().Debug().Str("hook", string(hook)).Int("dropped", dropped).Msg("list items dropped by plugins")
	}
	return out, dropped, nil
}
