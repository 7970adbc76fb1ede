// Package hookfamily is the one table of what a hook family is: which MCP
// method triggers which cpex hooks, the keys of the hook payloads, where the
// target name and the arguments sit in the request's params, which
// condition list selects the target, and where the result sits in a post
// hook payload. The processor (building payloads, rewriting messages) and
// the executor (checking modified payloads, matching conditions) both read
// it, so adding a family or a method that feeds one is one row and its
// tests.
//
// Two tables: [Family] rows describe a pair of hooks and their payloads
// (tool, prompt, resource); [Route] rows describe an MCP method and what of
// a family applies to it. A method whose answer carries a tool's result
// under another method (tasks/result, tasks/get) is a post-only Route of
// the tool family whose target name is learned elsewhere
// ([Route.TargetParam] empty).
//
// The tables are read-only; every lookup is a short linear scan over a
// handful of rows, cheap enough to run per message or per header.
package hookfamily

import (
	"iter"
	"slices"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Shape is what a payload value must look like (docs/plugin-protocol.md §2).
type Shape int

const (
	// ShapeObject: a JSON object.
	ShapeObject Shape = iota
	// ShapeStringMap: a JSON object whose values are strings.
	ShapeStringMap
	// ShapePresent: any JSON value but null.
	ShapePresent
)

// Family is one pair of hooks and the shape of their payloads.
type Family struct {
	// Name names the family in logs: "tool", "prompt", "resource".
	Name string
	// Pre and Post are the hooks run on the request and on its result.
	Pre, Post cpex.HookType
	// TargetKey is the payload key of the target name, in both payloads:
	// "name", "prompt_id", "uri".
	TargetKey string
	// LegacyTargetKey is the key older ContextForge payloads used for the
	// target ("name" in prompt payloads before ContextForge 1.0.8 renamed it
	// prompt_id); a modified payload without TargetKey is read from it. ""
	// when the family never had another name.
	LegacyTargetKey string
	// ArgsKey is the pre payload key of the arguments ("args", or
	// "metadata" for resources, which have no arguments); ArgsShape is
	// what a modified value must look like (absent and null are allowed).
	ArgsKey   string
	ArgsShape Shape
	// HeadersKey is the pre payload key of the forwarded HTTP headers
	// ("headers" for tools), "" when the family carries none.
	HeadersKey string
	// ResultKey is the post payload key of the MCP result ("result", or
	// "content" for resources); ResultShape is what it must look like.
	ResultKey   string
	ResultShape Shape
	// ConditionField is the condition list that selects targets of this
	// family: "tools", "prompts" or "resources" (the YAML key).
	ConditionField string
	conditions     func(*config.Condition) []string
}

// Conditions returns the list of c that matches this family's targets.
func (f *Family) Conditions(c *config.Condition) []string {
	if f == nil {
		return nil
	}
	return f.conditions(c)
}

// Route is one MCP method that triggers hooks of a family.
type Route struct {
	// Method is the JSON-RPC method (also the value of the Mcp-Method
	// header of MCP 2026-07-28).
	Method string
	Family *Family
	// Pre: the family's pre hook runs on the request. Post: its post hook
	// runs on the answer.
	Pre, Post bool
	// TargetParam is the params member holding the target name ("name",
	// "uri"); the Mcp-Name header of MCP 2026-07-28 mirrors it. Empty: the
	// target name is not in the request and comes from elsewhere (the
	// request that started a task).
	TargetParam string
	// ArgsParam is the params member holding the arguments ("arguments"),
	// "" when the method has none.
	ArgsParam string
	// ResultMember is the member of the answer's result that holds the
	// result the post hook sees ("result" for a tasks/get answer of the
	// 2026-07-28 tasks extension); "" means the whole result. An answer
	// without that member carries nothing for the post hook.
	ResultMember string
	// Permission and ResourceType are what http_auth_check_permission is
	// asked for a request of this method (ContextForge's names); ""
	// when the method is not checked.
	Permission, ResourceType string
	// Delegated: token_delegate runs on a request of this method.
	Delegated bool
	// CreatesTasks: an answer to this method may create a task whose
	// result later comes under tasks/result or tasks/get (learned from
	// the answer; the task's target is this request's).
	CreatesTasks bool
}

// Hooked reports whether a hook family applies to the method (r.Family is
// set); the other rows only say what a method needs of the per-message
// hooks (permission).
func (r *Route) Hooked() bool { return r.Family != nil }

// Target names what a message is about, for conditions: a family and the
// name of the tool, prompt or resource URI. The zero Target matches every
// condition list.
type Target struct {
	Family *Family
	Name   string
}

var (
	tool = &Family{
		Name: "tool", Pre: cpex.ToolPreInvoke, Post: cpex.ToolPostInvoke,
		TargetKey: "name", ArgsKey: "args", ArgsShape: ShapeObject, HeadersKey: "headers",
		ResultKey: "result", ResultShape: ShapeObject,
		ConditionField: "tools", conditions: func(c *config.Condition) []string { return c.Tools },
	}
	prompt = &Family{
		Name: "prompt", Pre: cpex.PromptPreFetch, Post: cpex.PromptPostFetch,
		TargetKey: "prompt_id", LegacyTargetKey: "name", ArgsKey: "args", ArgsShape: ShapeStringMap,
		ResultKey: "result", ResultShape: ShapeObject,
		ConditionField: "prompts", conditions: func(c *config.Condition) []string { return c.Prompts },
	}
	resource = &Family{
		Name: "resource", Pre: cpex.ResourcePreFetch, Post: cpex.ResourcePostFetch,
		TargetKey: "uri", ArgsKey: "metadata", ArgsShape: ShapeObject,
		ResultKey: "content", ResultShape: ShapePresent,
		ConditionField: "resources", conditions: func(c *config.Condition) []string { return c.Resources },
	}
)

// families lists every family; routes every method that triggers hooks.
var (
	families = [...]*Family{tool, prompt, resource}
	routes   = [...]Route{
		{Method: "tools/call", Family: tool, Pre: true, Post: true, TargetParam: "name", ArgsParam: "arguments",
			Permission: "tools.execute", ResourceType: "tool", Delegated: true, CreatesTasks: true},
		{Method: "prompts/get", Family: prompt, Pre: true, Post: true, TargetParam: "name", ArgsParam: "arguments",
			Permission: "prompts.read", ResourceType: "prompt"},
		{Method: "resources/read", Family: resource, Pre: true, Post: true, TargetParam: "uri",
			Permission: "resources.read", ResourceType: "resource"},
		// The answers that carry a task's tool result (2025-11-25
		// tasks/result; a completed tasks/get of the 2026-07-28 tasks
		// extension). The tool name is the one of the tools/call that
		// created the task.
		{Method: "tasks/result", Family: tool, Post: true},
		{Method: "tasks/get", Family: tool, Post: true, ResultMember: "result"},
		// Methods no family hooks, checked by http_auth_check_permission.
		{Method: "tools/list", Permission: "tools.read", ResourceType: "tool"},
		{Method: "prompts/list", Permission: "prompts.read", ResourceType: "prompt"},
		{Method: "resources/list", Permission: "resources.read", ResourceType: "resource"},
		{Method: "resources/templates/list", Permission: "resources.read", ResourceType: "resource"},
		{Method: "resources/subscribe", Permission: "resources.read", ResourceType: "resource"},
		{Method: "resources/unsubscribe", Permission: "resources.read", ResourceType: "resource"},
	}
)

// ByMethod returns the route of an MCP method a hook family applies to,
// and false when none does.
func ByMethod(method string) (*Route, bool) {
	r, ok := Operation(method)
	if !ok || r.Family == nil {
		return nil, false
	}
	return r, true
}

// Operation returns the row of any MCP method the table knows (hooked or
// only checked for permission), and false for the others (initialize,
// ping, notifications, completion, logging).
func Operation(method string) (*Route, bool) {
	for i := range routes {
		if routes[i].Method == method {
			return &routes[i], true
		}
	}
	return nil, false
}

// ByHook returns the family a hook belongs to (as its pre or post hook),
// and false for hooks no family has (http_*, agent_*).
func ByHook(h cpex.HookType) (*Family, bool) {
	for _, f := range families {
		if f.Pre == h || f.Post == h {
			return f, true
		}
	}
	return nil, false
}

// Families yields every family, in table order, without copying the table.
func Families() iter.Seq[*Family] { return slices.Values(families[:]) }

// TargetOf returns the target called name in the family of hook h (a zero
// family for hooks no family has).
func TargetOf(h cpex.HookType, name string) Target {
	f, _ := ByHook(h)
	return Target{Family: f, Name: name}
}
