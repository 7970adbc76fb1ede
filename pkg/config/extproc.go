package config

import (
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/rules"
)

// Defaults and bounds of the extproc section.
const (
	DefaultMaxBodyBytes = 1 << 20
	// MaxPluginSessions bounds extproc.plugin_sessions.
	MaxPluginSessions = 256
	// DefaultHookTimeoutMargin is added to plugin_timeout when
	// extproc.hook_timeout is not set.
	DefaultHookTimeoutMargin = time.Second
)

// DefaultMCPPath is the request path that carries MCP unless
// extproc.mcp_paths says otherwise.
const DefaultMCPPath = "/mcp"

// Extproc holds the sidecar's own settings; cpex ignores this key.
type Extproc struct {
	// MCPPaths are the request paths that carry MCP, matched
	// case-insensitively and with or without one trailing slash (see
	// IsMCPPath). Default ["/mcp"].
	MCPPaths []string `yaml:"mcp_paths,omitempty" json:"mcp_paths,omitempty" default:"/mcp"`
	// MaxBodyBytes is the largest body inspected. Default 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes,omitempty" json:"max_body_bytes,omitempty" default:"1048576 (1 MiB)"`
	// UserHeader, TenantHeader and ServerHeader name the request headers that
	// feed user, tenant_id and server_id of the plugin context. Lower-cased
	// at load (Envoy sends header names in lower case).
	// With Identity set, UserHeader and TenantHeader are refused: identity
	// then comes only from the declared sources. Without it they still
	// work, with a warning at load (a client can send them).
	UserHeader   string `yaml:"user_header,omitempty" json:"user_header,omitempty" default:"none"`
	TenantHeader string `yaml:"tenant_header,omitempty" json:"tenant_header,omitempty" default:"none"`
	ServerHeader string `yaml:"server_header,omitempty" json:"server_header,omitempty" default:"none"`
	// Identity says where the caller's identity comes from, most trusted
	// first (identity.go, docs/identity.md). Nil: the legacy headers above.
	Identity *Identity `yaml:"identity,omitempty" json:"identity,omitempty" default:"none: the legacy user_header and tenant_header"`
	// ForwardHeaders names the request headers copied into
	// ToolPreInvokePayload.headers (lower-cased at load). Credentials
	// (authorization, cookie, proxy-authorization) are never forwarded unless
	// listed here explicitly AND AllowCredentialHeaders is set; validation
	// refuses them otherwise.
	ForwardHeaders         []string `yaml:"forward_headers,omitempty" json:"forward_headers,omitempty" default:"none"`
	AllowCredentialHeaders bool     `yaml:"allow_credential_headers,omitempty" json:"allow_credential_headers,omitempty" default:"false"`
	// HookTimeout bounds a whole hook (all plugins of one message); it must
	// stay under Envoy's message_timeout, or Envoy answers 504 (or skips the
	// processor under failure_mode_allow) before the plugins' verdict
	// arrives. Default: plugin_timeout + 1 s. A value below plugin_timeout
	// is accepted with a warning: the hook deadline then cuts a slow plugin
	// before its own timeout does.
	HookTimeout *Seconds `yaml:"hook_timeout,omitempty" json:"hook_timeout,omitempty" default:"plugin_timeout + 1"`
	// PluginSessions is how many sessions (connections) the sidecar keeps
	// to each plugin, spread over its replicas; each carries one call at a
	// time. 0 means the client's default (8).
	PluginSessions int `yaml:"plugin_sessions,omitempty" json:"plugin_sessions,omitempty" default:"0: the client's default (8)"`
	// UnattributedResponses is what happens to a JSON-RPC result whose
	// request the sidecar cannot tell (a replay on a GET stream of a request
	// it does not remember, a task result of an unknown task) while post
	// hooks are configured: "refuse" (default) replaces it with a JSON-RPC
	// error for its id; "pass" forwards it uninspected.
	UnattributedResponses string `yaml:"unattributed_responses,omitempty" json:"unattributed_responses,omitempty" default:"refuse"`
	// UncertainMirroredHeaders is what happens when a pre hook rewrote an
	// argument mirrored in an Mcp-Param-* header (MCP 2026-07-28) and the
	// header cannot be rebuilt for sure: "remove" (default) forwards the
	// request without that header; "refuse" answers it with an error.
	UncertainMirroredHeaders string `yaml:"uncertain_mirrored_headers,omitempty" json:"uncertain_mirrored_headers,omitempty" default:"remove"`
	// TrustMCPMethodHeader lets the processor decide from the request
	// headers of MCP 2026-07-28 (Mcp-Method, Mcp-Name) which hooks can
	// apply, before reading the body: a request whose method no hook has, or
	// whose named target no plugin's conditions select, passes without its
	// body being read. Safe with conforming servers, which refuse a request
	// whose headers disagree with its body. Default true; false reads the
	// body of every MCP POST. Read it with [Extproc.TrustsMCPMethodHeader].
	TrustMCPMethodHeader *bool `yaml:"trust_mcp_method_header,omitempty" json:"trust_mcp_method_header,omitempty" default:"true"`
	// MCPFilterNamespace names the dynamic metadata namespace of Envoy's
	// MCP filter (envoy.filters.http.mcp, placed before ext_proc, its
	// namespace forwarded with metadata_options): "envoy.filters.http.mcp"
	// (default), "mcp_proxy" under Envoy's legacy runtime setting, or "off".
	// When Envoy sends it, the method Envoy read from the body of a request
	// whose headers do not name it (MCP 2025-11-25 and older) decides at the
	// request headers whether the answer must be read; the body is still
	// read, and one whose method differs is refused. Read it with
	// [Extproc.MCPFilterMetadata].
	MCPFilterNamespace string `yaml:"mcp_filter_namespace,omitempty" json:"mcp_filter_namespace,omitempty" default:"envoy.filters.http.mcp"`
	// Attribution is where what each request and task was is remembered:
	// in the process (default) or shared by replicas through Redis.
	Attribution Attribution `yaml:"attribution,omitempty" json:"attribution,omitempty" default:"store memory"`
	// ToolPinning pins the definitions servers advertise (pinning.go).
	ToolPinning ToolPinning `yaml:"tool_pinning,omitempty" json:"tool_pinning,omitempty" default:"mode off"`
	// Audit writes one audit event per decided MCP message (audit.go).
	Audit Audit `yaml:"audit,omitempty" json:"audit,omitempty" default:"off"`
	// Shadow runs every plugin and rule, and enforces nothing: no message
	// is refused or changed; the audit events, logs and metrics say what
	// would have been (would_deny, would_modify). For rolling out a new
	// plugin or rule set.
	Shadow bool `yaml:"shadow,omitempty" json:"shadow,omitempty" default:"false"`
	// Rules are authorization rules: CEL expressions evaluated in order on
	// every MCP request, which is refused when a rule's deny is true; list
	// results hide the items whose call a rule denies (docs/rules.md).
	// Validation compiles them all, so a file with a rule that does not
	// compile does not load.
	Rules []rules.Rule `yaml:"rules,omitempty" json:"rules,omitempty" default:"none"`
}

// TrustsMCPMethodHeader reports whether the Mcp-Method and Mcp-Name headers
// of MCP 2026-07-28 are trusted to decide before the body is read (default
// true).
func (e *Extproc) TrustsMCPMethodHeader() bool {
	return e.TrustMCPMethodHeader == nil || *e.TrustMCPMethodHeader
}

// MCPFilterMetadata returns the namespace of Envoy's MCP filter metadata
// to read, or "" when extproc.mcp_filter_namespace is off.
func (e *Extproc) MCPFilterMetadata() string {
	if e.MCPFilterNamespace == MCPFilterOff {
		return ""
	}
	return e.MCPFilterNamespace
}

// Values of Extproc.MCPFilterNamespace.
const (
	MCPFilterNamespace       = "envoy.filters.http.mcp"
	MCPFilterLegacyNamespace = "mcp_proxy"
	MCPFilterOff             = "off"
)

// Values of Extproc.UnattributedResponses and UncertainMirroredHeaders.
const (
	UnattributedRefuse = "refuse"
	UnattributedPass   = "pass"
	UncertainRemove    = "remove"
	UncertainRefuse    = "refuse"
)

// choices lists e's one-of-a-few-words settings, e being at path at.
func (e *Extproc) choices(at string) []choice {
	return []choice{
		{joinPath(at, "unattributed_responses"), &e.UnattributedResponses, []string{UnattributedRefuse, UnattributedPass}},
		{joinPath(at, "uncertain_mirrored_headers"), &e.UncertainMirroredHeaders, []string{UncertainRemove, UncertainRefuse}},
		{joinPath(at, "mcp_filter_namespace"), &e.MCPFilterNamespace, []string{MCPFilterNamespace, MCPFilterLegacyNamespace, MCPFilterOff}},
	}
}

// setDefaults fills in the extproc keys' defaults; hook_timeout's depends
// on plugin_settings, defaulted before. Its subsections (identity,
// attribution, tool_pinning) default themselves.
func (e *Extproc) setDefaults(c *Config) {
	if len(e.MCPPaths) == 0 {
		e.MCPPaths = []string{DefaultMCPPath}
	}
	if e.MaxBodyBytes == 0 {
		e.MaxBodyBytes = DefaultMaxBodyBytes
	}
	for _, ch := range e.choices("") {
		ch.setDefault()
	}
	e.UserHeader = lowerHeader(e.UserHeader)
	e.TenantHeader = lowerHeader(e.TenantHeader)
	e.ServerHeader = lowerHeader(e.ServerHeader)
	for i, h := range e.ForwardHeaders {
		e.ForwardHeaders[i] = lowerHeader(h)
	}
	rulesDefaults(e.Rules) // rules.go
	if e.HookTimeout == nil {
		e.HookTimeout = NewSeconds(c.PluginSettings.Timeout() + DefaultHookTimeoutMargin)
	}
}

// check checks the extproc keys and the rules (rules.go); its subsections
// (identity, attribution, tool_pinning) check themselves afterwards.
func (e *Extproc) check(v *validator, c *Config, at string) {
	for i, p := range e.MCPPaths {
		f := fmt.Sprintf("%s[%d]", joinPath(at, "mcp_paths"), i)
		switch {
		case !strings.HasPrefix(p, "/"):
			v.problem("", f, "must start with \"/\", got %q", p)
		case strings.ContainsAny(p, "?#"):
			v.problem("", f, "must be a path without query or fragment, got %q", p)
		}
	}
	if e.MaxBodyBytes <= 0 {
		v.problem("", joinPath(at, "max_body_bytes"), "must be positive")
	}
	if e.PluginSessions < 0 || e.PluginSessions > MaxPluginSessions {
		v.problem("", joinPath(at, "plugin_sessions"), "must be between 0 (default) and %d, got %d", MaxPluginSessions, e.PluginSessions)
	}
	v.choices(e.choices(at)...)
	for _, h := range []struct{ key, name string }{
		{"user_header", e.UserHeader},
		{"tenant_header", e.TenantHeader},
		{"server_header", e.ServerHeader},
	} {
		if h.name != "" && !validHeaderName(h.name) {
			v.problem("", joinPath(at, h.key), "%q is not a valid header name", h.name)
		}
	}
	e.checkLegacyIdentity(v, at)
	for i, h := range e.ForwardHeaders {
		f := fmt.Sprintf("%s[%d]", joinPath(at, "forward_headers"), i)
		switch {
		case !validHeaderName(h):
			v.problem("", f, "%q is not a valid header name", h)
		case IsCredentialHeader(h) && !e.AllowCredentialHeaders:
			v.problem("", f, "%q carries credentials: plugins would see them; set extproc.allow_credential_headers: true to forward it anyway", h)
		case IsCredentialHeader(h):
			v.warn("", f, "%q carries credentials and is forwarded to plugins", h)
		}
	}
	if e.HookTimeout != nil {
		s := &c.PluginSettings
		switch {
		case e.HookTimeout.Duration <= 0:
			v.problem("", joinPath(at, "hook_timeout"), "must be positive")
		case e.HookTimeout.Duration < s.Timeout():
			v.warn("", joinPath(at, "hook_timeout"), "%v is below plugin_timeout %v: the hook deadline cuts a slow plugin before its own timeout does", e.HookTimeout.Duration, s.Timeout())
		}
	}
	v.rules(c, joinPath(at, "rules")) // rules.go
}

// checkLegacyIdentity warns about identity from the legacy headers, which
// a client can send, and refuses them next to extproc.identity.
func (e *Extproc) checkLegacyIdentity(v *validator, at string) {
	legacy := []struct{ key, name string }{
		{"user_header", e.UserHeader},
		{"tenant_header", e.TenantHeader},
	}
	if e.ServerHeader != "" {
		v.warn("", joinPath(at, "server_header"), "server_id from request header %q, which any client can send unless Envoy removes it first", e.ServerHeader)
	}
	for _, h := range legacy {
		switch {
		case h.name == "":
		case e.Identity == nil:
			v.warn("", joinPath(at, h.key), "identity from request header %q, which any client can send: nothing tells it from one Envoy set; declare the source in extproc.identity.sources (docs/identity.md)", h.name)
		default:
			v.problem("", joinPath(at, h.key), "not used with extproc.identity: list the header in a headers source of extproc.identity.sources with set_by_envoy: true")
		}
	}
}

// HookTimeout is extproc.hook_timeout, or plugin_timeout + 1 s when unset:
// the deadline of one whole hook. Envoy's message_timeout must be larger.
func (c *Config) HookTimeout() time.Duration {
	if c.Extproc.HookTimeout != nil {
		return c.Extproc.HookTimeout.Duration
	}
	return c.PluginSettings.Timeout() + DefaultHookTimeoutMargin
}

// IsMCPPath reports whether a request path (query string and fragment
// ignored) is one of the configured MCP paths, compared as MCP servers
// route (Express, the TypeScript SDK's examples): case-insensitively, with
// or without one trailing slash, so "/MCP" and "/mcp/" are "/mcp". Without
// configured paths it matches the default "/mcp".
func (e *Extproc) IsMCPPath(path string) bool {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	path = trimOneSlash(path)
	if len(e.MCPPaths) == 0 {
		return strings.EqualFold(path, DefaultMCPPath)
	}
	for _, p := range e.MCPPaths {
		if strings.EqualFold(trimOneSlash(p), path) {
			return true
		}
	}
	return false
}

// trimOneSlash removes one trailing slash, except from "/".
func trimOneSlash(p string) string {
	if len(p) > 1 && p[len(p)-1] == '/' {
		return p[:len(p)-1]
	}
	return p
}

// RefusesUnattributed reports whether a response whose request the sidecar
// cannot tell is refused (extproc.unattributed_responses, default refuse).
func (e *Extproc) RefusesUnattributed() bool {
	return e.UnattributedResponses != UnattributedPass
}

// RefusesUncertainMirror reports whether a rewritten request whose
// Mcp-Param header cannot be rebuilt for sure is refused rather than
// forwarded without that header (extproc.uncertain_mirrored_headers,
// default remove).
func (e *Extproc) RefusesUncertainMirror() bool {
	return e.UncertainMirroredHeaders == UncertainRefuse
}

// credentialHeaders are the request headers that carry a caller's
// credential (lower case): never forwarded to plugins unless allowed,
// redacted in logs, removed upstream when token_delegate replaces the
// credential. Never written.
var credentialHeaders = [...]string{"authorization", "cookie", "proxy-authorization", "x-api-key"}

// IsCredentialHeader reports whether a header name (any case) carries
// credentials: authorization, cookie, proxy-authorization or x-api-key.
func IsCredentialHeader(name string) bool {
	return slices.Contains(credentialHeaders[:], lowerHeader(name))
}

// CredentialHeaders yields the credential header names, lower case.
func CredentialHeaders() iter.Seq[string] { return slices.Values(credentialHeaders[:]) }
