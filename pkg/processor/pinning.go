package processor

import (
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcplist"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
	"github.com/mcp-extproc/mcp-extproc/pkg/toolpin"
)

// extproc.tool_pinning (docs/tool-pinning.md): every tools/list,
// prompts/list and resources/templates/list answer is read (JSON, SSE, a
// GET replay, each page), its definitions fingerprinted and checked
// against the pins of the MCP server it came from (Snapshot.Pins); a
// changed one is logged and counted (alert), dropped (hide) or refuses the
// whole list (block). Under hide and block, a tools/call or prompts/get of
// a definition the last list showed changed (or, in mode approved, one
// the snapshot lacks) is refused, naming the change.

// pinsList reports whether the answer of a list method is checked.
func pinsList(snap *Snapshot, method string) bool {
	_, ok := toolpin.KindOfList(method)
	return ok && snap.Pins != nil
}

// pinScope is the MCP server a definition belongs to: server.id when one
// is configured or sent, else the upstream authority and path.
func (x *exchange) pinScope() string {
	if x.req.global.ServerID != "" {
		return x.req.global.ServerID
	}
	return x.req.authority + x.req.path
}

// checkPinnedCall refuses a tools/call or prompts/get of a definition that
// changed since it was pinned, when on_change hides or blocks.
// checkMessage calls it only when pinning is on.
func (b *bodyInspection) checkPinnedCall(i int, m *mcpmsg.Message) (refusal, bool) {
	x := b.x
	p := x.snap.Pins
	if m.Kind != mcpmsg.KindRequest {
		return refusal{}, false
	}
	var kind toolpin.Kind
	switch m.Method {
	case mcpmsg.MethodToolsCall:
		kind = toolpin.Tool
	case mcpmsg.MethodPromptsGet:
		kind = toolpin.Prompt
	default:
		return refusal{}, false
	}
	c, err := p.CallChange(x.ctx, x.pinScope(), kind, m.Name)
	if err != nil {
		x.logger().Warn().Err(err).Msg("tool pinning: the pin store did not answer; the call is not checked")
		return refusal{}, false
	}
	if c == nil {
		return refusal{}, false
	}
	x.logger().Info().Str("change", logsafe.Cap(c.String(), logsafe.DefaultCap)).Msg("refused: call of a changed definition")
	return refusal{index: i, id: m.ID, code: -32000, status: http.StatusOK, reason: "pinned", denied: true, by: m.Name, byKind: byPin,
		message: "mcp-extproc: " + c.String() + "; call refused until it is approved again",
		data:    map[string]any{"kind": string(c.Kind), "name": c.Name, "changed": c.Members}}, true
}

// pinnedItems checks the definitions of a list result against the pins.
// It returns which items to hide (on_change hide), or the JSON-RPC error
// replacing the whole list (on_change block), or neither.
func (rd reader) pinnedItems(m *mcpmsg.Message, l *mcplist.List) (hidden map[int]bool, refused []byte) {
	x := rd.x
	p := x.snap.Pins
	kind, ok := toolpin.KindOfList(l.Method)
	if p == nil || !ok {
		return nil, nil
	}
	// An unreadable result has no changes: the filter that follows
	// refuses it.
	changes, err := p.CheckResult(x.ctx, x.pinScope(), l, m.Result)
	if err != nil {
		x.logger().Warn().Err(err).Str("method", l.Method).Msg("tool pinning: the pin store did not answer; the list is not checked")
	}
	if len(changes) == 0 {
		return nil, nil
	}
	action := string(p.OnChange())
	var texts []string
	for _, i := range slices.Sorted(maps.Keys(changes)) {
		c := changes[i]
		texts = append(texts, c.String())
		x.obs.PinChange(string(kind), action)
		x.logger().Warn().Str("change", logsafe.Cap(c.String(), logsafe.DefaultCap)).Str("on_change", action).Msg("tool pinning: a definition changed since it was pinned")
	}
	switch p.OnChange() {
	case toolpin.Block:
		x.obs.Immediate("pinned")
		return nil, mcpmsg.ErrorResponse(m.ID, -32000, "mcp-extproc: "+l.Method+" refused: "+strings.Join(texts, "; "),
			map[string]any{"changed": texts})
	case toolpin.Hide:
		hidden = make(map[int]bool, len(changes))
		for i := range changes {
			hidden[i] = true
		}
		return hidden, nil
	}
	return nil, nil
}
