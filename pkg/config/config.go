// Package config is the configuration model of mcp-extproc: the cpex /
// ContextForge plugin YAML that users already write (plugins, plugin_settings),
// plus the sidecar's own settings under the extra top-level key "extproc".
// See docs/plugin-protocol.md §4.
//
// [Load] and [Parse] read a file the way the Python loader does (environment
// references expanded, legacy modes normalised), apply defaults and validate
// everything at once: the error is a [*ValidationError] that lists every
// problem with the plugin and field it concerns. Keys this program does not
// know (cpex has more, and grows) never fail a load; they are reported in
// [Config.Warnings].
//
// Plugin-level fields that the plugin server may supply (hooks, mode,
// priority, on_error, conditions) are left unset when the file does not set
// them, because the local file only overrides the keys it sets
// (plugin-protocol.md §1.3); use the Effective* accessors to read them with
// defaults applied.
//
// The structs carry json tags with the same names as the yaml tags, so the
// plugin config a server returns from get_plugin_config decodes into [Plugin].
package config

import (
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/rules"
)

// Config is a whole configuration file.
type Config struct {
	Plugins        []Plugin       `yaml:"plugins" json:"plugins"`
	PluginDirs     []string       `yaml:"plugin_dirs,omitempty" json:"plugin_dirs,omitempty"` // accepted, ignored
	PluginSettings PluginSettings `yaml:"plugin_settings" json:"plugin_settings"`
	Extproc        Extproc        `yaml:"extproc" json:"extproc"`

	// Warnings lists what loaded but deserves attention: unknown keys,
	// settings the sidecar ignores, hooks that never fire here. Filled by
	// [Parse] and [Load]; never part of the file.
	Warnings []Problem `yaml:"-" json:"-"`
}

// Mode is a cpex plugin mode, normalised from the legacy names.
type Mode string

// The cpex modes (plugin-protocol.md §4.1).
const (
	ModeSequential    Mode = "sequential"
	ModeTransform     Mode = "transform"
	ModeAudit         Mode = "audit"
	ModeConcurrent    Mode = "concurrent"
	ModeFireAndForget Mode = "fire_and_forget"
	ModeDisabled      Mode = "disabled"
)

// The legacy mode names that cpex still accepts and migrates at load.
const (
	LegacyModeEnforce            Mode = "enforce"              // = sequential
	LegacyModePermissive         Mode = "permissive"           // = transform
	LegacyModeEnforceIgnoreError Mode = "enforce_ignore_error" // = sequential + on_error ignore
)

// OnError is a plugin's failure policy (plugin-protocol.md §4.2).
type OnError string

// The on_error policies.
const (
	OnErrorFail    OnError = "fail"    // fail closed: refuse the request
	OnErrorIgnore  OnError = "ignore"  // fail open: log and continue
	OnErrorDisable OnError = "disable" // log, continue, stop calling the plugin
)

// KindExternal is the only plugin kind the sidecar runs.
const KindExternal = "external"

// The MCP transports of an mcp section (mcp.proto) the sidecar speaks:
// Streamable HTTP, the legacy HTTP+SSE transport, and a child process on
// stdin/stdout that the sidecar starts.
const (
	ProtoStreamableHTTP = "STREAMABLEHTTP"
	ProtoSSE            = "SSE"
	ProtoSTDIO          = "STDIO"
)

// Defaults, as cpex defines them (and the sidecar's own).
const (
	DefaultPriority            = 100
	DefaultPluginTimeout       = 30 * time.Second
	DefaultHealthCheckInterval = 60 * time.Second
	DefaultReconnectAttempts   = 3
	DefaultReconnectDelay      = 100 * time.Millisecond
	DefaultSocketTimeout       = 30 * time.Second // unix_socket.timeout
	DefaultMaxBodyBytes        = 1 << 20
	// MaxPluginSessions bounds extproc.plugin_sessions.
	MaxPluginSessions = 256
	// DefaultHookTimeoutMargin is added to plugin_timeout when
	// extproc.hook_timeout is not set.
	DefaultHookTimeoutMargin = time.Second
)

// DefaultMCPPath is the request path that carries MCP unless
// extproc.mcp_paths says otherwise.
const DefaultMCPPath = "/mcp"

// Plugin is one entry of "plugins".
type Plugin struct {
	Name        string          `yaml:"name" json:"name"`
	Kind        string          `yaml:"kind" json:"kind"`
	Description string          `yaml:"description,omitempty" json:"description,omitempty"`
	Author      string          `yaml:"author,omitempty" json:"author,omitempty"`
	Version     string          `yaml:"version,omitempty" json:"version,omitempty"`
	Tags        []string        `yaml:"tags,omitempty" json:"tags,omitempty"`
	Hooks       []cpex.HookType `yaml:"hooks,omitempty" json:"hooks,omitempty"`
	Mode        Mode            `yaml:"mode,omitempty" json:"mode,omitempty"`
	Priority    *int            `yaml:"priority,omitempty" json:"priority,omitempty"` // nil: not set locally; default 100
	OnError     OnError         `yaml:"on_error,omitempty" json:"on_error,omitempty"`
	Conditions  []Condition     `yaml:"conditions,omitempty" json:"conditions,omitempty"`
	AppliedTo   map[string]any  `yaml:"applied_to,omitempty" json:"applied_to,omitempty"`
	Config      map[string]any  `yaml:"config,omitempty" json:"config,omitempty"`
	MCP         *MCP            `yaml:"mcp,omitempty" json:"mcp,omitempty"`
	GRPC        *GRPC           `yaml:"grpc,omitempty" json:"grpc,omitempty"`
	UnixSocket  *UnixSocket     `yaml:"unix_socket,omitempty" json:"unix_socket,omitempty"`
}

// Condition is one entry of a plugin's "conditions": every set field must
// match; a plugin runs when any entry matches or the list is empty.
type Condition struct {
	ServerIDs    []string `yaml:"server_ids,omitempty" json:"server_ids,omitempty"`
	TenantIDs    []string `yaml:"tenant_ids,omitempty" json:"tenant_ids,omitempty"`
	Tools        []string `yaml:"tools,omitempty" json:"tools,omitempty"`
	Prompts      []string `yaml:"prompts,omitempty" json:"prompts,omitempty"`
	Resources    []string `yaml:"resources,omitempty" json:"resources,omitempty"`
	Agents       []string `yaml:"agents,omitempty" json:"agents,omitempty"`
	UserPatterns []string `yaml:"user_patterns,omitempty" json:"user_patterns,omitempty"`
	ContentTypes []string `yaml:"content_types,omitempty" json:"content_types,omitempty"`
}

// MCP is the transport of an external plugin.
type MCP struct {
	Proto             string            `yaml:"proto" json:"proto"` // STREAMABLEHTTP, SSE or STDIO
	URL               string            `yaml:"url,omitempty" json:"url,omitempty"`
	Script            string            `yaml:"script,omitempty" json:"script,omitempty"`
	Cmd               []string          `yaml:"cmd,omitempty" json:"cmd,omitempty"`
	Env               map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	Cwd               string            `yaml:"cwd,omitempty" json:"cwd,omitempty"`
	UDS               string            `yaml:"uds,omitempty" json:"uds,omitempty"`
	TLS               *TLS              `yaml:"tls,omitempty" json:"tls,omitempty"`
	ReconnectAttempts *int              `yaml:"reconnect_attempts,omitempty" json:"reconnect_attempts,omitempty"` // default 3
	ReconnectDelay    *Seconds          `yaml:"reconnect_delay,omitempty" json:"reconnect_delay,omitempty"`       // default 0.1 s
}

// GRPC is the gRPC transport of an external plugin: exactly one of Target
// and UDS.
type GRPC struct {
	Target string `yaml:"target,omitempty" json:"target,omitempty"` // host:port
	UDS    string `yaml:"uds,omitempty" json:"uds,omitempty"`       // absolute socket path: gRPC over a Unix socket
	TLS    *TLS   `yaml:"tls,omitempty" json:"tls,omitempty"`       // not with UDS
}

// UnixSocket is cpex's raw Unix-socket transport of an external plugin
// (length-prefixed protobuf frames).
type UnixSocket struct {
	Path              string   `yaml:"path" json:"path"`                                                 // absolute, required
	ReconnectAttempts *int     `yaml:"reconnect_attempts,omitempty" json:"reconnect_attempts,omitempty"` // default 3
	ReconnectDelay    *Seconds `yaml:"reconnect_delay,omitempty" json:"reconnect_delay,omitempty"`       // default 0.1 s
	Timeout           *Seconds `yaml:"timeout,omitempty" json:"timeout,omitempty"`                       // read timeout, default 30 s
}

// TLS configures the client side of a plugin connection.
type TLS struct {
	CertFile        string `yaml:"certfile,omitempty" json:"certfile,omitempty"`
	KeyFile         string `yaml:"keyfile,omitempty" json:"keyfile,omitempty"`
	CABundle        string `yaml:"ca_bundle,omitempty" json:"ca_bundle,omitempty"`
	KeyFilePassword string `yaml:"keyfile_password,omitempty" json:"keyfile_password,omitempty"`
	Verify          *bool  `yaml:"verify,omitempty" json:"verify,omitempty"`                 // default true
	CheckHostname   *bool  `yaml:"check_hostname,omitempty" json:"check_hostname,omitempty"` // default true
}

// PluginSettings is "plugin_settings".
type PluginSettings struct {
	PluginTimeout               *Seconds `yaml:"plugin_timeout,omitempty" json:"plugin_timeout,omitempty"` // default 30 s
	FailOnPluginError           bool     `yaml:"fail_on_plugin_error,omitempty" json:"fail_on_plugin_error,omitempty"`
	ParallelExecutionWithinBand bool     `yaml:"parallel_execution_within_band,omitempty" json:"parallel_execution_within_band,omitempty"`
	PluginHealthCheckInterval   *Seconds `yaml:"plugin_health_check_interval,omitempty" json:"plugin_health_check_interval,omitempty"` // default 60 s
}

// Extproc holds the sidecar's own settings; cpex ignores this key.
type Extproc struct {
	// MCPPaths are the request paths that carry MCP, matched
	// case-insensitively and with or without one trailing slash (see
	// IsMCPPath). Default ["/mcp"].
	MCPPaths []string `yaml:"mcp_paths,omitempty" json:"mcp_paths,omitempty"`
	// MaxBodyBytes is the largest body inspected. Default 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes,omitempty" json:"max_body_bytes,omitempty"`
	// UserHeader, TenantHeader and ServerHeader name the request headers that
	// feed user, tenant_id and server_id of the plugin context. Lower-cased
	// at load (Envoy sends header names in lower case).
	// With Identity set, UserHeader and TenantHeader are refused: identity
	// then comes only from the declared sources. Without it they still
	// work, with a warning at load (a client can send them).
	UserHeader   string `yaml:"user_header,omitempty" json:"user_header,omitempty"`
	TenantHeader string `yaml:"tenant_header,omitempty" json:"tenant_header,omitempty"`
	ServerHeader string `yaml:"server_header,omitempty" json:"server_header,omitempty"`
	// Identity says where the caller's identity comes from, most trusted
	// first (identity.go, docs/identity.md). Nil: the legacy headers above.
	Identity *Identity `yaml:"identity,omitempty" json:"identity,omitempty"`
	// ForwardHeaders names the request headers copied into
	// ToolPreInvokePayload.headers (lower-cased at load). Credentials
	// (authorization, cookie, proxy-authorization) are never forwarded unless
	// listed here explicitly AND AllowCredentialHeaders is set; validation
	// refuses them otherwise.
	ForwardHeaders         []string `yaml:"forward_headers,omitempty" json:"forward_headers,omitempty"`
	AllowCredentialHeaders bool     `yaml:"allow_credential_headers,omitempty" json:"allow_credential_headers,omitempty"`
	// HookTimeout bounds a whole hook (all plugins of one message); it must
	// stay under Envoy's message_timeout, or Envoy answers 504 (or skips the
	// processor under failure_mode_allow) before the plugins' verdict
	// arrives. Default: plugin_timeout + 1 s. A value below plugin_timeout
	// is accepted with a warning: the hook deadline then cuts a slow plugin
	// before its own timeout does.
	HookTimeout *Seconds `yaml:"hook_timeout,omitempty" json:"hook_timeout,omitempty"`
	// PluginSessions is how many sessions (connections) the sidecar keeps
	// to each plugin, spread over its replicas; each carries one call at a
	// time. 0 means the client's default (8).
	PluginSessions int `yaml:"plugin_sessions,omitempty" json:"plugin_sessions,omitempty"`
	// UnattributedResponses is what happens to a JSON-RPC result whose
	// request the sidecar cannot tell (a replay on a GET stream of a request
	// it does not remember, a task result of an unknown task) while post
	// hooks are configured: "refuse" (default) replaces it with a JSON-RPC
	// error for its id; "pass" forwards it uninspected.
	UnattributedResponses string `yaml:"unattributed_responses,omitempty" json:"unattributed_responses,omitempty"`
	// UncertainMirroredHeaders is what happens when a pre hook rewrote an
	// argument mirrored in an Mcp-Param-* header (MCP 2026-07-28) and the
	// header cannot be rebuilt for sure: "remove" (default) forwards the
	// request without that header; "refuse" answers it with an error.
	UncertainMirroredHeaders string `yaml:"uncertain_mirrored_headers,omitempty" json:"uncertain_mirrored_headers,omitempty"`
	// TrustMCPMethodHeader lets the processor decide from the request
	// headers of MCP 2026-07-28 (Mcp-Method, Mcp-Name) which hooks can
	// apply, before reading the body: a request whose method no hook has, or
	// whose named target no plugin's conditions select, passes without its
	// body being read. Safe with conforming servers, which refuse a request
	// whose headers disagree with its body. Default true; false reads the
	// body of every MCP POST. Read it with [Extproc.TrustsMCPMethodHeader].
	TrustMCPMethodHeader *bool `yaml:"trust_mcp_method_header,omitempty" json:"trust_mcp_method_header,omitempty"`
	// MCPFilterNamespace names the dynamic metadata namespace of Envoy's
	// MCP filter (envoy.filters.http.mcp, placed before ext_proc, its
	// namespace forwarded with metadata_options): "envoy.filters.http.mcp"
	// (default), "mcp_proxy" under Envoy's legacy runtime setting, or "off".
	// When Envoy sends it, the method Envoy read from the body of a request
	// whose headers do not name it (MCP 2025-11-25 and older) decides at the
	// request headers whether the answer must be read; the body is still
	// read, and one whose method differs is refused. Read it with
	// [Extproc.MCPFilterMetadata].
	MCPFilterNamespace string `yaml:"mcp_filter_namespace,omitempty" json:"mcp_filter_namespace,omitempty"`
	// Attribution is where what each request and task was is remembered:
	// in the process (default) or shared by replicas through Redis.
	Attribution Attribution `yaml:"attribution,omitempty" json:"attribution,omitempty"`
	// ToolPinning pins the definitions servers advertise (pinning.go).
	ToolPinning ToolPinning `yaml:"tool_pinning,omitempty" json:"tool_pinning,omitempty"`
	// Rules are authorization rules: CEL expressions evaluated in order on
	// every MCP request, which is refused when a rule's deny is true; list
	// results hide the items whose call a rule denies (docs/rules.md).
	// Validation compiles them all, so a file with a rule that does not
	// compile does not load.
	Rules []rules.Rule `yaml:"rules,omitempty" json:"rules,omitempty"`
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

// choice is an extproc setting that takes one of a few words.
type choice struct {
	field  string   // its path in the file, for problems
	value  *string  // lower-cased by ApplyDefaults
	values []string // the allowed words; values[0] is the default
}

// choices lists e's one-of-a-few-words settings, read by ApplyDefaults and
// the validator alike.
func (e *Extproc) choices() []choice {
	return []choice{
		{"extproc.unattributed_responses", &e.UnattributedResponses, []string{UnattributedRefuse, UnattributedPass}},
		{"extproc.uncertain_mirrored_headers", &e.UncertainMirroredHeaders, []string{UncertainRemove, UncertainRefuse}},
		{"extproc.attribution.store", &e.Attribution.Store, []string{StoreMemory, StoreRedis}},
		{"extproc.mcp_filter_namespace", &e.MCPFilterNamespace, []string{MCPFilterNamespace, MCPFilterLegacyNamespace, MCPFilterOff}},
		{"extproc.tool_pinning.mode", &e.ToolPinning.Mode, []string{PinningOff, PinningRecord, PinningApproved}},
		{"extproc.tool_pinning.on_change", &e.ToolPinning.OnChange, []string{PinAlert, PinHide, PinBlock}},
	}
}

// Seconds is a duration written in seconds (int or float) as cpex does.
type Seconds struct{ time.Duration }
