// Package config is the configuration model of mcp-extproc: the cpex /
// ContextForge plugin YAML that users already write (plugins, plugin_settings),
// plus the sidecar's own settings under the extra top-level key "extproc".
// See shared/docs/plugin-protocol.md §4.
package config

import (
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Config is a whole configuration file.
type Config struct {
	Plugins        []Plugin       `yaml:"plugins"`
	PluginDirs     []string       `yaml:"plugin_dirs,omitempty"` // accepted, ignored
	PluginSettings PluginSettings `yaml:"plugin_settings"`
	Extproc        Extproc        `yaml:"extproc"`
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

// OnError is a plugin's failure policy (plugin-protocol.md §4.2).
type OnError string

// The on_error policies.
const (
	OnErrorFail    OnError = "fail"    // fail closed: refuse the request
	OnErrorIgnore  OnError = "ignore"  // fail open: log and continue
	OnErrorDisable OnError = "disable" // log, continue, stop calling the plugin
)

// Plugin is one entry of "plugins".
type Plugin struct {
	Name        string          `yaml:"name"`
	Kind        string          `yaml:"kind"`
	Description string          `yaml:"description,omitempty"`
	Author      string          `yaml:"author,omitempty"`
	Version     string          `yaml:"version,omitempty"`
	Tags        []string        `yaml:"tags,omitempty"`
	Hooks       []cpex.HookType `yaml:"hooks,omitempty"`
	Mode        Mode            `yaml:"mode,omitempty"`
	Priority    *int            `yaml:"priority,omitempty"` // nil: not set locally; default 100
	OnError     OnError         `yaml:"on_error,omitempty"`
	Conditions  []Condition     `yaml:"conditions,omitempty"`
	AppliedTo   map[string]any  `yaml:"applied_to,omitempty"`
	Config      map[string]any  `yaml:"config,omitempty"`
	MCP         *MCP            `yaml:"mcp,omitempty"`
}

// Condition is one entry of a plugin's "conditions": every set field must
// match; a plugin runs when any entry matches or the list is empty.
type Condition struct {
	ServerIDs    []string `yaml:"server_ids,omitempty"`
	TenantIDs    []string `yaml:"tenant_ids,omitempty"`
	Tools        []string `yaml:"tools,omitempty"`
	Prompts      []string `yaml:"prompts,omitempty"`
	Resources    []string `yaml:"resources,omitempty"`
	Agents       []string `yaml:"agents,omitempty"`
	UserPatterns []string `yaml:"user_patterns,omitempty"`
	ContentTypes []string `yaml:"content_types,omitempty"`
}

// MCP is the transport of an external plugin.
type MCP struct {
	Proto             string   `yaml:"proto"` // STREAMABLEHTTP (SSE, STDIO: unsupported here)
	URL               string   `yaml:"url,omitempty"`
	Script            string   `yaml:"script,omitempty"`
	Cmd               []string `yaml:"cmd,omitempty"`
	Env               map[string]string `yaml:"env,omitempty"`
	Cwd               string   `yaml:"cwd,omitempty"`
	UDS               string   `yaml:"uds,omitempty"`
	TLS               *TLS     `yaml:"tls,omitempty"`
	ReconnectAttempts *int     `yaml:"reconnect_attempts,omitempty"` // default 3
	ReconnectDelay    *Seconds `yaml:"reconnect_delay,omitempty"`    // default 0.1 s
}

// TLS configures the client side of a plugin connection.
type TLS struct {
	CertFile        string `yaml:"certfile,omitempty"`
	KeyFile         string `yaml:"keyfile,omitempty"`
	CABundle        string `yaml:"ca_bundle,omitempty"`
	KeyFilePassword string `yaml:"keyfile_password,omitempty"`
	Verify          *bool  `yaml:"verify,omitempty"`         // default true
	CheckHostname   *bool  `yaml:"check_hostname,omitempty"` // default true
}

// PluginSettings is "plugin_settings".
type PluginSettings struct {
	PluginTimeout              *Seconds `yaml:"plugin_timeout,omitempty"` // default 30 s
	FailOnPluginError          bool     `yaml:"fail_on_plugin_error,omitempty"`
	ParallelExecutionWithinBand bool    `yaml:"parallel_execution_within_band,omitempty"`
	PluginHealthCheckInterval  *Seconds `yaml:"plugin_health_check_interval,omitempty"` // default 60 s
}

// Extproc holds the sidecar's own settings; cpex ignores this key.
type Extproc struct {
	// MCPPaths are the request paths that carry MCP (exact match). Default ["/mcp"].
	MCPPaths []string `yaml:"mcp_paths,omitempty"`
	// MaxBodyBytes is the largest body inspected. Default 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes,omitempty"`
	// UserHeader, TenantHeader and ServerHeader name the request headers that
	// feed user, tenant_id and server_id of the plugin context.
	UserHeader   string `yaml:"user_header,omitempty"`
	TenantHeader string `yaml:"tenant_header,omitempty"`
	ServerHeader string `yaml:"server_header,omitempty"`
	// ForwardHeaders names the request headers copied into
	// ToolPreInvokePayload.headers. Credentials (authorization, cookie,
	// proxy-authorization) are never forwarded unless listed here explicitly
	// AND AllowCredentialHeaders is set.
	ForwardHeaders         []string `yaml:"forward_headers,omitempty"`
	AllowCredentialHeaders bool     `yaml:"allow_credential_headers,omitempty"`
	// HookTimeout bounds a whole hook (all plugins of one message); it must
	// stay under Envoy's message_timeout. Default: plugin_timeout + 1 s.
	HookTimeout *Seconds `yaml:"hook_timeout,omitempty"`
}

// Seconds is a duration written in seconds (int or float) as cpex does.
type Seconds struct{ time.Duration }
