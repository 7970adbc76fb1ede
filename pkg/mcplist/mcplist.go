// Package mcplist filters the results of the MCP list methods (tools/list,
// prompts/list, resources/list, resources/templates/list) item by item, so
// that a caller sees only the items it may use.
//
// Filtering does not re-encode: every byte that is not part of a dropped
// item comes out as it came in, in order (whitespace, member order, escapes,
// unknown members, nextCursor, _meta). Only the top-level members of the
// result and of each item are looked at; the values below them are checked
// for syntax and skipped.
//
// What a client could read in more than one way is an error, never a guess:
// the caller must then not forward the result (fail closed). See
// [List.Filter] for the cases.
package mcplist

import (
	"iter"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// List is one MCP list method: the one table of these protocol facts.
type List struct {
	// Method is the JSON-RPC method of the list request, e.g. "tools/list".
	Method string
	// ItemsKey is the member of the result that holds the items, e.g. "tools".
	ItemsKey string
	// NameKey is the member of an item that names it, e.g. "name".
	NameKey string
	// CallMethod is the method through which an item is used, e.g.
	// "tools/call": the method a rule is asked about for each item.
	CallMethod string
	// Hook is the plugins' hook for the list's results, e.g.
	// cpex.ToolsPostList.
	Hook cpex.HookType
}

// lists is the table behind ByMethod and All. It is never modified: the
// entries handed out are shared and read-only (no allocation per request).
var lists = [...]List{
	{Method: "tools/list", ItemsKey: "tools", NameKey: "name", CallMethod: "tools/call", Hook: cpex.ToolsPostList},
	{Method: "prompts/list", ItemsKey: "prompts", NameKey: "name", CallMethod: "prompts/get", Hook: cpex.PromptsPostList},
	{Method: "resources/list", ItemsKey: "resources", NameKey: "uri", CallMethod: "resources/read", Hook: cpex.ResourcesPostList},
	{Method: "resources/templates/list", ItemsKey: "resourceTemplates", NameKey: "uriTemplate", CallMethod: "resources/read", Hook: cpex.ResourcesPostList},
}

// ByMethod returns the list method's entry, or false if method is not one of
// the MCP list methods. The method is compared exactly, as JSON-RPC does.
// The entry is shared: read it, never change it.
func ByMethod(method string) (*List, bool) {
	for i := range lists {
		if lists[i].Method == method {
			return &lists[i], true
		}
	}
	return nil, false
}

// All yields every list method's entry, in a fixed order; the entries are
// shared as ByMethod's.
func All() iter.Seq[*List] {
	return func(yield func(*List) bool) {
		for i := range lists {
			if !yield(&lists[i]) {
				return
			}
		}
	}
}
