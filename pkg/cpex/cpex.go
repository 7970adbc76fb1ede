// Package cpex holds the wire types of the ContextForge (cpex) external plugin
// protocol: the hook names, the payloads, the plugin context, and the replies a
// plugin server sends to invoke_hook. JSON field names are exact; see
// docs/plugin-protocol.md.
//
// The package has no behaviour beyond (un)marshalling helpers, so the client,
// the server, the executor and the processor can share it without importing
// each other.
package cpex

import (
	"encoding/json"
	"errors"
	"iter"
	"math"
	"slices"
	"time"
)

// ErrInvalidReply is the cause of every failure where a plugin answered
// invoke_hook with something that is not a cpex reply: not JSON, neither
// result nor error, or an MCP tool error instead of a reply. Plugin clients
// wrap it and the executor classifies with errors.Is, so an invalid reply is
// counted as "invalid", never as a transport "error".
var ErrInvalidReply = errors.New("invalid plugin reply")

// Tool names a plugin server exposes.
const (
	ToolGetPluginConfigs = "get_plugin_configs"
	ToolGetPluginConfig  = "get_plugin_config"
	ToolInvokeHook       = "invoke_hook"
)

// HookType names a hook, as sent in invoke_hook's "hook_type" argument.
type HookType string

// The hooks that MCP JSON-RPC traffic triggers.
const (
	ToolPreInvoke     HookType = "tool_pre_invoke"
	ToolPostInvoke    HookType = "tool_post_invoke"
	PromptPreFetch    HookType = "prompt_pre_fetch"
	PromptPostFetch   HookType = "prompt_post_fetch"
	ResourcePreFetch  HookType = "resource_pre_fetch"
	ResourcePostFetch HookType = "resource_post_fetch"
)

// The HTTP-level hooks (docs/identity.md): run at the request headers of
// MCP requests, before the MCP hooks.
const (
	HTTPPreRequest          HookType = "http_pre_request"
	HTTPPostRequest         HookType = "http_post_request"
	HTTPAuthResolveUser     HookType = "http_auth_resolve_user"
	HTTPAuthCheckPermission HookType = "http_auth_check_permission"
)

// cpex's identity hooks (cpex/framework/hooks/identity.py; renamed
// identity.resolve and token.delegate in cpex 0.2, with these names kept as
// aliases). The sidecar runs token_delegate on a tools/call.
const (
	IdentityResolve HookType = "identity_resolve"
	TokenDelegate   HookType = "token_delegate"
)

// The list hooks: a plugin that declares one is given each list result
// of its kind (after the rules filtered it) and may drop items (modified
// payload) or refuse the list (violation). Proposed in ContextForge #673;
// cpex 0.1 does not define them, so only plugin servers that know them
// (this project's Go SDK, pkg/pluginserver) declare them.
const (
	ToolsPostList     HookType = "tools_post_list"
	PromptsPostList   HookType = "prompts_post_list"
	ResourcesPostList HookType = "resources_post_list" // resources/list and resources/templates/list
)

// MCPHooks lists the hooks this project dispatches, in request/response pairs.
var MCPHooks = [...]HookType{
	ToolPreInvoke, ToolPostInvoke,
	PromptPreFetch, PromptPostFetch,
	ResourcePreFetch, ResourcePostFetch,
}

// Dispatch is when the sidecar runs a hook.
type Dispatch uint8

// The moments the sidecar runs hooks at.
const (
	// AtRequestHeaders: once per request to an MCP path, before its body
	// (http_pre_request and the identity hooks).
	AtRequestHeaders Dispatch = iota + 1
	// AtResponseHeaders: once per request, on the answer's headers
	// (http_post_request).
	AtResponseHeaders
	// PerMessage: on each JSON-RPC request of a body (the families' pre
	// hooks, http_auth_check_permission, token_delegate).
	PerMessage
	// PerResult: on each result of a hooked request (the families' post
	// hooks).
	PerResult
	// PerList: on each list result of its kind (the list hooks).
	PerList
)

// dispatched is the one list of the hooks the sidecar runs, and when.
// Never written.
var dispatched = [...]struct {
	hook HookType
	when Dispatch
}{
	{HTTPPreRequest, AtRequestHeaders}, {HTTPAuthResolveUser, AtRequestHeaders}, {IdentityResolve, AtRequestHeaders},
	{HTTPPostRequest, AtResponseHeaders},
	{HTTPAuthCheckPermission, PerMessage}, {TokenDelegate, PerMessage},
	{ToolPreInvoke, PerMessage}, {PromptPreFetch, PerMessage}, {ResourcePreFetch, PerMessage},
	{ToolPostInvoke, PerResult}, {PromptPostFetch, PerResult}, {ResourcePostFetch, PerResult},
	{ToolsPostList, PerList}, {PromptsPostList, PerList}, {ResourcesPostList, PerList},
}

// DispatchOf returns when the sidecar runs hook h, and false for a hook it
// never runs (agent_*, evaluate, elicit, cmf.llm_*; aliases are asked by
// their hook: CanonicalHook).
func DispatchOf(h HookType) (Dispatch, bool) {
	for _, d := range dispatched {
		if d.hook == h {
			return d.when, true
		}
	}
	return 0, false
}

// Dispatched yields the hooks the sidecar runs and when, in table order,
// without copying the table.
func Dispatched() iter.Seq2[HookType, Dispatch] {
	return func(yield func(HookType, Dispatch) bool) {
		for _, d := range dispatched {
			if !yield(d.hook, d.when) {
				return
			}
		}
	}
}

// The hooks of cpex's CMF message family (MessagePayload) that have no bare
// hook in the sidecar: they are known, so a config naming them loads, but
// nothing dispatches them.
const (
	CMFLLMInput  HookType = "cmf.llm_input"
	CMFLLMOutput HookType = "cmf.llm_output"
)

// knownHooks lists every hook type cpex defines: the MCP hooks, then the
// http_*, agent_* and identity families, evaluate (cpex 0.1.x) and elicit
// (cpex 0.2), and the CMF hooks with no bare hook. The aliases of
// hookAliases are known too. Never written.
var knownHooks = [...]HookType{
	ToolPreInvoke, ToolPostInvoke, PromptPreFetch, PromptPostFetch,
	ResourcePreFetch, ResourcePostFetch,
	HTTPPreRequest, HTTPPostRequest, HTTPAuthResolveUser,
	HTTPAuthCheckPermission, "agent_pre_invoke", "agent_post_invoke",
	IdentityResolve, TokenDelegate, "evaluate", "elicit",
	CMFLLMInput, CMFLLMOutput,
	ToolsPostList, PromptsPostList, ResourcesPostList,
}

// HookAlias is another name cpex accepts for a hook: Alias is dispatched as
// Hook.
type HookAlias struct {
	Alias, Hook HookType
}

// hookAliases is the one table of hook aliases: cpex 0.1.x's CMF names
// (cmf.x falls back to the bare hook x) and the 0.2 runtime's prompt names
// (it dispatches prompt_*_invoke where its types say prompt_*_fetch). The
// sidecar runs an alias as its hook, with that hook's payload. Never
// written.
var hookAliases = [...]HookAlias{
	{"cmf.tool_pre_invoke", ToolPreInvoke},
	{"cmf.tool_post_invoke", ToolPostInvoke},
	{"cmf.prompt_pre_fetch", PromptPreFetch},
	{"cmf.prompt_post_fetch", PromptPostFetch},
	{"cmf.resource_pre_fetch", ResourcePreFetch},
	{"cmf.resource_post_fetch", ResourcePostFetch},
	{"cmf.prompt_pre_invoke", PromptPreFetch},
	{"cmf.prompt_post_invoke", PromptPostFetch},
	{"prompt_pre_invoke", PromptPreFetch},
	{"prompt_post_invoke", PromptPostFetch},
}

// HookAliases returns the alias table (a fresh slice).
func HookAliases() []HookAlias { return slices.Clone(hookAliases[:]) }

// CanonicalHook returns the hook the sidecar runs for h: the hook of an
// alias, else h itself.
func CanonicalHook(h HookType) HookType {
	for _, a := range hookAliases {
		if a.Alias == h {
			return a.Hook
		}
	}
	return h
}

// CanonicalHooks returns hooks with every alias replaced by its hook and
// repeats dropped, in order of first appearance; nil stays nil.
func CanonicalHooks(hooks []HookType) []HookType {
	if hooks == nil {
		return nil
	}
	out := make([]HookType, 0, len(hooks))
	for _, h := range hooks {
		if c := CanonicalHook(h); !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// KnownHooks returns every hook type cpex defines (a fresh slice): the MCP
// hooks first, then the other families, then the aliases.
func KnownHooks() []HookType {
	out := slices.Clone(knownHooks[:])
	for _, a := range hookAliases {
		out = append(out, a.Alias)
	}
	return out
}

// KnownHook reports whether h is a hook type that cpex defines, including the
// families this project does not dispatch (agent_*, cmf.llm_*) and the
// aliases.
func KnownHook(h HookType) bool {
	return slices.Contains(knownHooks[:], h) || CanonicalHook(h) != h
}

// HTTPPreRequestPayload is the payload of http_pre_request. Headers is
// required (an empty object when there are none); its modified_payload is a
// header map, set over the request's headers.
type HTTPPreRequestPayload struct {
	Path       string            `json:"path"`
	Method     string            `json:"method"`
	Headers    map[string]string `json:"headers"`
	ClientHost string            `json:"client_host,omitempty"`
	ClientPort int               `json:"client_port,omitempty"`
}

// HTTPPostRequestPayload is the payload of http_post_request: the request
// as http_pre_request saw it, with the response's headers and status. Its
// modified_payload is a header map, set on the response.
type HTTPPostRequestPayload struct {
	Path            string            `json:"path"`
	Method          string            `json:"method"`
	Headers         map[string]string `json:"headers"`
	ClientHost      string            `json:"client_host,omitempty"`
	ClientPort      int               `json:"client_port,omitempty"`
	ResponseHeaders map[string]string `json:"response_headers"`
	StatusCode      int               `json:"status_code"`
}

// HTTPCredentials are the scheme and value of an Authorization header.
type HTTPCredentials struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials"`
}

// HTTPAuthResolveUserPayload is the payload of http_auth_resolve_user. Its
// modified_payload is the user (an object: ContextForge reads email,
// full_name, is_admin, is_active).
type HTTPAuthResolveUserPayload struct {
	Headers     map[string]string `json:"headers"`
	Credentials *HTTPCredentials  `json:"credentials"`
	ClientHost  string            `json:"client_host,omitempty"`
	ClientPort  int               `json:"client_port,omitempty"`
}

// ResolvedUser is the part of an http_auth_resolve_user result the sidecar
// reads. IsActive nil means true.
type ResolvedUser struct {
	Email    string `json:"email"`
	FullName string `json:"full_name"`
	IsAdmin  bool   `json:"is_admin"`
	IsActive *bool  `json:"is_active"`
}

// HTTPAuthCheckPermissionPayload is the payload of
// http_auth_check_permission: may this user do this (docs/identity.md has
// the permission of each MCP operation). Its modified_payload is a
// [PermissionDecision].
type HTTPAuthCheckPermissionPayload struct {
	UserEmail    string `json:"user_email"`
	Permission   string `json:"permission"`
	ResourceType string `json:"resource_type,omitempty"`
	TeamID       string `json:"team_id,omitempty"`
	AuthMethod   string `json:"auth_method,omitempty"`
	ClientHost   string `json:"client_host,omitempty"`
	UserAgent    string `json:"user_agent,omitempty"`
	IsAdmin      bool   `json:"is_admin"`
}

// PermissionDecision is the answer of http_auth_check_permission. Granted
// is required.
type PermissionDecision struct {
	Granted *bool  `json:"granted"`
	Reason  string `json:"reason,omitempty"`
}

// TokenDelegatePayload is the payload of token_delegate: the credential to
// send to the target instead of the caller's. BearerToken is the caller's
// real token (cpex's own client sends "**********"): never log it. Its
// modified_payload is a [Delegation].
type TokenDelegatePayload struct {
	TargetName string `json:"target_name"`
	TargetType string `json:"target_type"`
	// TargetAudience is the MCP server's URI (scheme, authority, path),
	// the audience a delegated token is for.
	TargetAudience string `json:"target_audience,omitempty"`
	// RequiredPermissions are the permissions the call needs
	// (hookfamily.Route.Permission: tools.execute).
	RequiredPermissions []string `json:"required_permissions,omitempty"`
	AuthEnforcedBy      string   `json:"auth_enforced_by,omitempty"`
	BearerToken         string   `json:"bearer_token,omitempty"`
}

// Delegation is the part of a token_delegate answer the sidecar reads:
// ForwardedHeaders go on the upstream request; without them, DelegatedToken
// becomes its Authorization: Bearer. delegation_update, cache_key and
// cache_ttl are not read.
type Delegation struct {
	DelegatedToken   string            `json:"delegated_token,omitempty"`
	ForwardedHeaders map[string]string `json:"forwarded_headers,omitempty"`
}

// IdentityResolvePayload is the payload of identity_resolve. RawToken is
// the caller's real token (cpex's own client sends "**********"): never
// log it. Headers is required by the model's default ({}), sent anyway.
type IdentityResolvePayload struct {
	RawToken   string            `json:"raw_token"`
	Source     string            `json:"source"`
	Headers    map[string]string `json:"headers"`
	ClientHost string            `json:"client_host,omitempty"`
	ClientPort int               `json:"client_port,omitempty"`
}

// Subject is who identity_resolve says is calling (cpex's security
// extension). ID and Type are required.
type Subject struct {
	ID          string   `json:"id"`
	Type        string   `json:"type"`
	Roles       []string `json:"roles,omitempty"`
	Permissions []string `json:"permissions,omitempty"`
	Teams       []string `json:"teams,omitempty"`
}

// IdentityResolution is the part of an identity_resolve answer the sidecar
// reads. RejectStatus is a float because cpex's gRPC server answers numbers
// as doubles.
type IdentityResolution struct {
	Subject      *Subject `json:"subject"`
	Rejected     bool     `json:"rejected"`
	RejectStatus *float64 `json:"reject_status"`
	RejectReason string   `json:"reject_reason"`
}

// ToolPreInvokePayload is the payload of tool_pre_invoke.
type ToolPreInvokePayload struct {
	Name    string            `json:"name"`
	Args    json.RawMessage   `json:"args,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// ToolPostInvokePayload is the payload of tool_post_invoke. Result is the MCP
// CallToolResult object, kept as raw JSON.
type ToolPostInvokePayload struct {
	Name   string          `json:"name"`
	Result json.RawMessage `json:"result"`
}

// PromptPreFetchPayload is the payload of prompt_pre_fetch.
type PromptPreFetchPayload struct {
	PromptID string          `json:"prompt_id"`
	Args     json.RawMessage `json:"args,omitempty"`
}

// PromptPostFetchPayload is the payload of prompt_post_fetch. Result is the
// MCP GetPromptResult object.
type PromptPostFetchPayload struct {
	PromptID string          `json:"prompt_id"`
	Result   json.RawMessage `json:"result"`
}

// ResourcePreFetchPayload is the payload of resource_pre_fetch.
type ResourcePreFetchPayload struct {
	URI      string          `json:"uri"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// ResourcePostFetchPayload is the payload of resource_post_fetch. Content is
// the MCP ReadResourceResult (its "contents").
type ResourcePostFetchPayload struct {
	URI     string          `json:"uri"`
	Content json.RawMessage `json:"content"`
}

// GlobalContext is the request-wide part of the plugin context.
type GlobalContext struct {
	RequestID string          `json:"request_id"`
	User      json.RawMessage `json:"user,omitempty"` // a string or an object
	// UserContext is the verified caller, when the sidecar knows one
	// (extproc.identity). cpex's gRPC proto has no such field.
	UserContext *UserContext   `json:"user_context,omitempty"`
	TenantID    string         `json:"tenant_id,omitempty"`
	ServerID    string         `json:"server_id,omitempty"`
	State       map[string]any `json:"state"`
	Metadata    map[string]any `json:"metadata"`
}

// UserContext is GlobalContext.user_context, as ContextForge fills it after
// authentication.
type UserContext struct {
	UserID     string   `json:"user_id"`
	Email      string   `json:"email,omitempty"`
	FullName   string   `json:"full_name,omitempty"`
	IsAdmin    bool     `json:"is_admin"`
	Roles      []string `json:"roles,omitempty"`
	Teams      []string `json:"teams,omitempty"`
	TeamID     string   `json:"team_id,omitempty"`
	AuthMethod string   `json:"auth_method,omitempty"`
}

// PluginContext is the context sent with every invoke_hook and returned by
// plugins that changed it.
type PluginContext struct {
	State         map[string]any `json:"state"`
	Metadata      map[string]any `json:"metadata"`
	GlobalContext GlobalContext  `json:"global_context"`
}

// PluginViolation is a plugin's reason to block.
type PluginViolation struct {
	Reason         string            `json:"reason"`
	Description    string            `json:"description"`
	Code           string            `json:"code"`
	Details        map[string]any    `json:"details,omitempty"`
	PluginName     string            `json:"plugin_name,omitempty"`
	MCPErrorCode   *int              `json:"mcp_error_code,omitempty"`
	HTTPStatusCode *int              `json:"http_status_code,omitempty"`
	HTTPHeaders    map[string]string `json:"http_headers,omitempty"`
}

// PluginResult is the result of one hook invocation.
type PluginResult struct {
	// ContinueProcessing defaults to true when absent; use Continue.
	ContinueProcessing *bool             `json:"continue_processing,omitempty"`
	ModifiedPayload    json.RawMessage   `json:"modified_payload,omitempty"`
	Violation          *PluginViolation  `json:"violation,omitempty"`
	Metadata           map[string]any    `json:"metadata,omitempty"`
	HTTPHeaders        map[string]string `json:"http_headers,omitempty"`
	// RetryDelayMS is cpex's hint that the client may retry after this
	// many milliseconds (a rate limit, say); a double over gRPC. Use
	// RetryDelay.
	RetryDelayMS *float64 `json:"retry_delay_ms,omitempty"`
}

// MaxRetryDelay bounds the retry delay a plugin result can ask of a client:
// a longer one is cut to it.
const MaxRetryDelay = time.Hour

// RetryDelay returns retry_delay_ms as a duration in (0, MaxRetryDelay]:
// 0 when it is absent, not positive or not a number, MaxRetryDelay when it
// is longer.
func (r *PluginResult) RetryDelay() time.Duration {
	if r.RetryDelayMS == nil {
		return 0
	}
	ms := *r.RetryDelayMS
	switch {
	case math.IsNaN(ms) || ms <= 0:
		return 0
	case ms >= float64(MaxRetryDelay/time.Millisecond):
		return MaxRetryDelay
	}
	return time.Duration(math.Ceil(ms * float64(time.Millisecond)))
}

// Continue reports whether processing continues (absent means true).
func (r *PluginResult) Continue() bool {
	return r.ContinueProcessing == nil || *r.ContinueProcessing
}

// Modified reports whether the result carries a modified payload (JSON null
// counts as none).
func (r *PluginResult) Modified() bool {
	return len(r.ModifiedPayload) > 0 && string(r.ModifiedPayload) != "null"
}

// PluginErrorModel is the error a plugin server reports instead of a result.
type PluginErrorModel struct {
	Message      string         `json:"message"`
	PluginName   string         `json:"plugin_name"`
	Code         string         `json:"code,omitempty"`
	Details      map[string]any `json:"details,omitempty"`
	MCPErrorCode *int           `json:"mcp_error_code,omitempty"`
}

// InvokeHookArgs are the arguments of the invoke_hook tool.
type InvokeHookArgs struct {
	HookType   HookType        `json:"hook_type"`
	PluginName string          `json:"plugin_name"`
	Payload    json.RawMessage `json:"payload"`
	Context    *PluginContext  `json:"context"`
}

// InvokeHookReply is the JSON a plugin server returns from invoke_hook: exactly
// one of Result and Error is set; Context only when the plugin changed it.
type InvokeHookReply struct {
	PluginName string            `json:"plugin_name"`
	Result     *PluginResult     `json:"result,omitempty"`
	Context    *PluginContext    `json:"context,omitempty"`
	Error      *PluginErrorModel `json:"error,omitempty"`
}

// NewContext returns a context with empty, non-nil maps, as the Python
// framework sends it.
func NewContext(g GlobalContext) *PluginContext {
	if g.State == nil {
		g.State = map[string]any{}
	}
	if g.Metadata == nil {
		g.Metadata = map[string]any{}
	}
	return &PluginContext{State: map[string]any{}, Metadata: map[string]any{}, GlobalContext: g}
}
