package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Plugin is one entry of "plugins".
type Plugin struct {
	Name        string          `yaml:"name" json:"name" default:"required"`
	Kind        string          `yaml:"kind" json:"kind" default:"required"`
	Description string          `yaml:"description,omitempty" json:"description,omitempty" default:"none"`
	Author      string          `yaml:"author,omitempty" json:"author,omitempty" default:"none"`
	Version     string          `yaml:"version,omitempty" json:"version,omitempty" default:"none"`
	Tags        []string        `yaml:"tags,omitempty" json:"tags,omitempty" default:"none"`
	Hooks       []cpex.HookType `yaml:"hooks,omitempty" json:"hooks,omitempty" default:"the plugin server's"`
	Mode        Mode            `yaml:"mode,omitempty" json:"mode,omitempty" default:"the plugin server's, else sequential"`
	Priority    *int            `yaml:"priority,omitempty" json:"priority,omitempty" default:"the plugin server's, else 100"` // nil: not set locally; default 100
	OnError     OnError         `yaml:"on_error,omitempty" json:"on_error,omitempty" default:"the plugin server's, else fail"`
	Conditions  []Condition     `yaml:"conditions,omitempty" json:"conditions,omitempty" default:"the plugin server's, else always"`
	AppliedTo   map[string]any  `yaml:"applied_to,omitempty" json:"applied_to,omitempty" default:"none"`
	Config      map[string]any  `yaml:"config,omitempty" json:"config,omitempty" default:"none"`
	MCP         *MCP            `yaml:"mcp,omitempty" json:"mcp,omitempty" default:"none; one transport is required for kind external"`
	GRPC        *GRPC           `yaml:"grpc,omitempty" json:"grpc,omitempty" default:"none; one transport is required for kind external"`
	UnixSocket  *UnixSocket     `yaml:"unix_socket,omitempty" json:"unix_socket,omitempty" default:"none; one transport is required for kind external"`
}

// cpexOnlyKeys: a plugin's namespace.
func (p *Plugin) cpexOnlyKeys() []string { return []string{"namespace"} }

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

// Defaults of a plugin entry and its transports, as cpex defines them.
const (
	DefaultPriority          = 100
	DefaultReconnectAttempts = 3
	DefaultReconnectDelay    = 100 * time.Millisecond
	DefaultSocketTimeout     = 30 * time.Second // unix_socket.timeout
)

// Condition is one entry of a plugin's "conditions": every set field must
// match; a plugin runs when any entry matches or the list is empty.
type Condition struct {
	ServerIDs    []string `yaml:"server_ids,omitempty" json:"server_ids,omitempty" default:"any"`
	TenantIDs    []string `yaml:"tenant_ids,omitempty" json:"tenant_ids,omitempty" default:"any"`
	Tools        []string `yaml:"tools,omitempty" json:"tools,omitempty" default:"any"`
	Prompts      []string `yaml:"prompts,omitempty" json:"prompts,omitempty" default:"any"`
	Resources    []string `yaml:"resources,omitempty" json:"resources,omitempty" default:"any"`
	Agents       []string `yaml:"agents,omitempty" json:"agents,omitempty" default:"any; ignored"`
	UserPatterns []string `yaml:"user_patterns,omitempty" json:"user_patterns,omitempty" default:"any"`
	ContentTypes []string `yaml:"content_types,omitempty" json:"content_types,omitempty" default:"any; ignored"`
}

// MCP is the transport of an external plugin.
type MCP struct {
	Proto             string            `yaml:"proto" json:"proto" default:"required"` // STREAMABLEHTTP, SSE or STDIO
	URL               string            `yaml:"url,omitempty" json:"url,omitempty" default:"required except with STDIO"`
	Script            string            `yaml:"script,omitempty" json:"script,omitempty" default:"none; STDIO needs script or cmd"`
	Cmd               []string          `yaml:"cmd,omitempty" json:"cmd,omitempty" default:"none; STDIO needs script or cmd"`
	Env               map[string]string `yaml:"env,omitempty" json:"env,omitempty" default:"none"`
	Cwd               string            `yaml:"cwd,omitempty" json:"cwd,omitempty" default:"the sidecar's working directory"`
	UDS               string            `yaml:"uds,omitempty" json:"uds,omitempty" default:"none: TCP to the url's host"`
	TLS               *TLS              `yaml:"tls,omitempty" json:"tls,omitempty" default:"none: the system roots for https"`
	ReconnectAttempts *int              `yaml:"reconnect_attempts,omitempty" json:"reconnect_attempts,omitempty" default:"3"` // default 3
	ReconnectDelay    *Seconds          `yaml:"reconnect_delay,omitempty" json:"reconnect_delay,omitempty" default:"0.1"`     // default 0.1 s
}

// GRPC is the gRPC transport of an external plugin: exactly one of Target
// and UDS.
type GRPC struct {
	Target string `yaml:"target,omitempty" json:"target,omitempty" default:"none; one of target and uds is required"` // host:port
	UDS    string `yaml:"uds,omitempty" json:"uds,omitempty" default:"none; one of target and uds is required"`       // absolute socket path: gRPC over a Unix socket
	TLS    *TLS   `yaml:"tls,omitempty" json:"tls,omitempty" default:"none: plaintext"`                               // not with UDS
}

// UnixSocket is cpex's raw Unix-socket transport of an external plugin
// (length-prefixed protobuf frames).
type UnixSocket struct {
	Path              string   `yaml:"path" json:"path" default:"required"`                                          // absolute, required
	ReconnectAttempts *int     `yaml:"reconnect_attempts,omitempty" json:"reconnect_attempts,omitempty" default:"3"` // default 3
	ReconnectDelay    *Seconds `yaml:"reconnect_delay,omitempty" json:"reconnect_delay,omitempty" default:"0.1"`     // default 0.1 s
	Timeout           *Seconds `yaml:"timeout,omitempty" json:"timeout,omitempty" default:"30"`                      // read timeout, default 30 s
}

// TLS configures the client side of a plugin connection (and of the
// attribution store's Redis).
type TLS struct {
	CertFile        string `yaml:"certfile,omitempty" json:"certfile,omitempty" default:"none: no client certificate"`
	KeyFile         string `yaml:"keyfile,omitempty" json:"keyfile,omitempty" default:"none: no client certificate"`
	CABundle        string `yaml:"ca_bundle,omitempty" json:"ca_bundle,omitempty" default:"none: the system roots"`
	KeyFilePassword string `yaml:"keyfile_password,omitempty" json:"keyfile_password,omitempty" default:"none: the key is not encrypted"`
	Verify          *bool  `yaml:"verify,omitempty" json:"verify,omitempty" default:"true"`                 // default true
	CheckHostname   *bool  `yaml:"check_hostname,omitempty" json:"check_hostname,omitempty" default:"true"` // default true
}

// legacyModes maps the legacy mode names to the cpex modes.
var legacyModes = map[Mode]Mode{
	LegacyModeEnforce:            ModeSequential,
	LegacyModePermissive:         ModeTransform,
	LegacyModeEnforceIgnoreError: ModeSequential,
}

// Canonical returns the cpex mode m stands for (legacy names mapped, case
// and blanks ignored) and whether m is a known mode. "" is not known.
func (m Mode) Canonical() (Mode, bool) {
	s := Mode(strings.ToLower(strings.TrimSpace(string(m))))
	if c, ok := legacyModes[s]; ok {
		return c, true
	}
	switch s {
	case ModeSequential, ModeTransform, ModeAudit, ModeConcurrent, ModeFireAndForget, ModeDisabled:
		return s, true
	}
	return s, false
}

// Canonical returns the policy o stands for (case and blanks ignored) and
// whether it is known. "" is not known.
func (o OnError) Canonical() (OnError, bool) {
	s := OnError(strings.ToLower(strings.TrimSpace(string(o))))
	switch s {
	case OnErrorFail, OnErrorIgnore, OnErrorDisable:
		return s, true
	}
	return s, false
}

// setDefaults normalises the entry (legacy modes, case of mode, on_error
// and proto) and fills in its transport's defaults. Keys the plugin server
// may supply stay unset (see the Effective* accessors).
func (p *Plugin) setDefaults(*Config) {
	p.Name = strings.TrimSpace(p.Name)
	p.Kind = strings.TrimSpace(p.Kind)
	// cpex's other names for a hook run as that hook (one table, in cpex).
	p.Hooks = cpex.CanonicalHooks(p.Hooks)
	if p.Mode != "" {
		raw := Mode(strings.ToLower(strings.TrimSpace(string(p.Mode))))
		if raw == LegacyModeEnforceIgnoreError && p.OnError == "" {
			p.OnError = OnErrorIgnore
		}
		p.Mode, _ = raw.Canonical()
	}
	if p.OnError != "" {
		p.OnError, _ = p.OnError.Canonical()
	}
	if m := p.MCP; m != nil {
		m.Proto = strings.ToUpper(strings.TrimSpace(m.Proto))
		m.URL = strings.TrimSpace(m.URL)
		reconnectDefaults(&m.ReconnectAttempts, &m.ReconnectDelay)
		m.TLS.applyDefaults()
	}
	if g := p.GRPC; g != nil {
		g.Target, g.UDS = strings.TrimSpace(g.Target), strings.TrimSpace(g.UDS)
		g.TLS.applyDefaults()
	}
	if u := p.UnixSocket; u != nil {
		u.Path = strings.TrimSpace(u.Path)
		reconnectDefaults(&u.ReconnectAttempts, &u.ReconnectDelay)
		if u.Timeout == nil {
			u.Timeout = NewSeconds(DefaultSocketTimeout)
		}
	}
}

// reconnectDefaults fills in reconnect_attempts and reconnect_delay, which
// the mcp and unix_socket transports share.
func reconnectDefaults(attempts **int, delay **Seconds) {
	if *attempts == nil {
		*attempts = ptr(DefaultReconnectAttempts)
	}
	if *delay == nil {
		*delay = NewSeconds(DefaultReconnectDelay)
	}
}

// applyDefaults expands "~/" in the file paths and sets verify and
// check_hostname (default true); nil t is left alone.
func (t *TLS) applyDefaults() {
	if t == nil {
		return
	}
	t.CertFile = expandHome(t.CertFile)
	t.KeyFile = expandHome(t.KeyFile)
	t.CABundle = expandHome(t.CABundle)
	if t.Verify == nil {
		t.Verify = ptr(true)
	}
	if t.CheckHostname == nil {
		t.CheckHostname = ptr(true)
	}
}

// EffectivePriority is the priority with the default (100) applied. Lower
// runs first.
func (p *Plugin) EffectivePriority() int {
	if p.Priority == nil {
		return DefaultPriority
	}
	return *p.Priority
}

// EffectiveMode is the cpex mode with legacy names mapped and the default
// (sequential) applied. An unknown mode, which validation refuses in the
// file but a plugin server could still send, counts as sequential: the
// strictest mode, so a typo never turns enforcement off.
func (p *Plugin) EffectiveMode() Mode {
	m, ok := p.Mode.Canonical()
	if !ok {
		return ModeSequential
	}
	return m
}

// EffectiveOnError is the failure policy with defaults applied:
// plugin_settings.fail_on_plugin_error forces fail; an unset on_error is
// ignore for the legacy mode enforce_ignore_error and fail otherwise; an
// unknown value counts as fail (fail closed).
func (p *Plugin) EffectiveOnError(s PluginSettings) OnError {
	if s.FailOnPluginError {
		return OnErrorFail
	}
	if p.OnError == "" {
		if Mode(strings.ToLower(strings.TrimSpace(string(p.Mode)))) == LegacyModeEnforceIgnoreError {
			return OnErrorIgnore
		}
		return OnErrorFail
	}
	o, ok := p.OnError.Canonical()
	if !ok {
		return OnErrorFail
	}
	return o
}

// Attempts is reconnect_attempts with its default (3).
func (m *MCP) Attempts() int {
	if m == nil || m.ReconnectAttempts == nil {
		return DefaultReconnectAttempts
	}
	return *m.ReconnectAttempts
}

// Delay is reconnect_delay with its default (0.1 s): cpex's base delay
// between reconnection attempts.
func (m *MCP) Delay() time.Duration {
	if m == nil || m.ReconnectDelay == nil {
		return DefaultReconnectDelay
	}
	return m.ReconnectDelay.Duration
}

// VerifyEnabled reports whether the server certificate is verified
// (tls.verify, default true; also true without a tls section).
func (t *TLS) VerifyEnabled() bool { return t == nil || t.Verify == nil || *t.Verify }

// HostnameCheckEnabled reports whether the server name is checked against
// the certificate (tls.check_hostname, default true). Python ignores it
// when verify is false, and so should the client.
func (t *TLS) HostnameCheckEnabled() bool {
	return t == nil || t.CheckHostname == nil || *t.CheckHostname
}

// check checks the entry at "plugins[i]": its name (required, unique
// ignoring case), kind, hooks, mode, on_error, conditions and, for an
// external plugin, its transport. Problems name the plugin; an unnamed one
// is named by position.
func (p *Plugin) check(v *validator, c *Config, at string) {
	label, base := p.Name, ""
	if label == "" {
		base = at
		v.problem("", joinPath(base, "name"), "required")
	} else {
		for j := range c.Plugins {
			q := &c.Plugins[j]
			if q == p {
				break
			}
			if q.Name != "" && strings.ToLower(q.Name) == strings.ToLower(label) {
				v.problem(label, "name", "duplicate: plugins[%d] has the same name (names are compared ignoring case)", j)
				break
			}
		}
	}
	field := func(f string) string { return joinPath(base, f) }
	external := v.kind(p, label, field) // builtin.go
	if p.Kind == KindExternal && len(p.Config) > 0 {
		v.problem(label, field("config"), "not allowed with kind external: a plugin's config is set on the plugin server")
	}
	for i, h := range p.Hooks {
		f := field(fmt.Sprintf("hooks[%d]", i))
		switch {
		case !cpex.KnownHook(h):
			v.problem(label, f, "unknown hook %q%s", h, didYouMean(string(h), words(cpex.KnownHooks()...)))
		case (h == cpex.TokenDelegate || h == cpex.IdentityResolve) && p.MCP == nil && (p.GRPC != nil || p.UnixSocket != nil):
			v.warn(label, f, "hook %q over gRPC or the Unix socket: cpex 0.1.3 servers fail on its typed answers there; use mcp", h)
		case h == cpex.CMFLLMInput || h == cpex.CMFLLMOutput:
			v.warn(label, f, "hook %q never runs: the sidecar sees MCP traffic, not LLM input or output, and cpex has no bare hook for it", h)
		case !sidecarHook(h):
			v.warn(label, f, "hook %q never fires in the sidecar (only the tool, prompt, resource, *_post_list, http_*, identity_resolve and token_delegate hooks do)", h)
		}
	}
	if p.Mode != "" {
		if _, ok := p.Mode.Canonical(); !ok {
			v.problem(label, field("mode"), "unknown mode %q: want sequential, transform, audit, concurrent, fire_and_forget or disabled (legacy: enforce, permissive, enforce_ignore_error)%s", p.Mode,
				didYouMean(string(p.Mode), words(ModeSequential, ModeTransform, ModeAudit, ModeConcurrent, ModeFireAndForget, ModeDisabled,
					LegacyModeEnforce, LegacyModePermissive, LegacyModeEnforceIgnoreError)))
		}
	}
	if p.OnError != "" {
		if _, ok := p.OnError.Canonical(); !ok {
			v.problem(label, field("on_error"), "unknown on_error %q: want fail, ignore or disable%s", p.OnError,
				didYouMean(string(p.OnError), words(OnErrorFail, OnErrorIgnore, OnErrorDisable)))
		}
	}
	for i, c := range p.Conditions {
		f := field(fmt.Sprintf("conditions[%d]", i))
		if len(c.ContentTypes) > 0 {
			v.warn(label, joinPath(f, "content_types"), "ignored: the sidecar does not match content types")
		}
		if len(c.Agents) > 0 {
			v.warn(label, joinPath(f, "agents"), "ignored: agent hooks never fire in the sidecar")
		}
	}
	if !external {
		return // the transport of a plugin that cannot run, or runs in-process, is not worth checking
	}
	v.transport(p, label, field)
}

// sidecarHook reports whether the sidecar dispatches hook h.
func sidecarHook(h cpex.HookType) bool {
	_, ok := cpex.DispatchOf(h)
	return ok
}

// transport checks that an external plugin has exactly one of mcp, grpc
// and unix_socket (as cpex does), and checks that one.
func (v *validator) transport(p *Plugin, label string, field func(string) string) {
	var set []string
	for _, t := range []struct {
		name string
		set  bool
	}{{"mcp", p.MCP != nil}, {"grpc", p.GRPC != nil}, {"unix_socket", p.UnixSocket != nil}} {
		if t.set {
			set = append(set, t.name)
		}
	}
	switch {
	case len(set) == 0:
		v.problem(label, field("mcp"), "required for an external plugin: one of mcp: {proto: STREAMABLEHTTP, url: http://host:port/mcp}, grpc: {target: host:port} or unix_socket: {path: /abs/path.sock}")
		return
	case len(set) > 1:
		v.problem(label, field(set[1]), "only one transport per plugin: %s are all set", strings.Join(set, ", "))
		return
	}
	switch {
	case p.MCP != nil:
		v.mcp(p.MCP, label, field)
	case p.GRPC != nil:
		v.grpc(p.GRPC, label, field)
	default:
		v.unixSocket(p.UnixSocket, label, field)
	}
}

func (v *validator) grpc(g *GRPC, label string, field func(string) string) {
	switch {
	case g.Target == "" && g.UDS == "":
		v.problem(label, field("grpc"), "one of target (host:port) and uds (/abs/path.sock) is required")
	case g.Target != "" && g.UDS != "":
		v.problem(label, field("grpc.uds"), "target and uds are exclusive")
	case g.UDS != "" && !filepath.IsAbs(g.UDS):
		v.problem(label, field("grpc.uds"), "must be an absolute path")
	case g.UDS != "" && g.TLS != nil:
		v.problem(label, field("grpc.tls"), "not supported with a Unix domain socket (grpc.uds)")
	case g.Target != "":
		if host, port, err := net.SplitHostPort(g.Target); err != nil || host == "" || port == "" {
			v.problem(label, field("grpc.target"), "must be host:port, got %q", g.Target)
		}
	}
	v.tls(g.TLS, label, field, "grpc.tls")
}

func (v *validator) unixSocket(u *UnixSocket, label string, field func(string) string) {
	switch {
	case u.Path == "":
		v.problem(label, field("unix_socket.path"), "required: the plugin server's socket, e.g. /var/run/plugins/pii.sock")
	case !filepath.IsAbs(u.Path):
		v.problem(label, field("unix_socket.path"), "must be an absolute path")
	}
	v.reconnect(u.ReconnectAttempts, u.ReconnectDelay, label, field, "unix_socket")
	if u.Timeout != nil && u.Timeout.Duration <= 0 {
		v.problem(label, field("unix_socket.timeout"), "must be positive")
	}
}

func (v *validator) mcp(m *MCP, label string, field func(string) string) {
	switch m.Proto {
	case ProtoStreamableHTTP, ProtoSSE:
	case ProtoSTDIO:
		v.stdio(m, label, field)
	case "":
		v.problem(label, field("mcp.proto"), "required: STREAMABLEHTTP, SSE or STDIO")
	case "HTTP", "GRPC":
		v.problem(label, field("mcp.proto"), "unsupported proto %q: want STREAMABLEHTTP, SSE or STDIO (gRPC is a grpc: section)", m.Proto)
	default:
		v.problem(label, field("mcp.proto"), "unknown proto %q: want STREAMABLEHTTP, SSE or STDIO%s", m.Proto, didYouMean(m.Proto, mcpProtos))
	}
	if m.Proto != ProtoSTDIO {
		if m.URL == "" {
			v.problem(label, field("mcp.url"), "required: the plugin server's MCP endpoint, e.g. http://plugin:8000/mcp")
		} else if u, err := url.Parse(m.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.problem(label, field("mcp.url"), "must be an http(s) URL")
		} else if u.Scheme == "http" && m.TLS != nil && m.UDS == "" {
			v.warn(label, field("mcp.tls"), "ignored: the url is plain http://")
		}
		if m.Script != "" || len(m.Cmd) > 0 || len(m.Env) > 0 || m.Cwd != "" {
			v.problem(label, field("mcp"), "script, cmd, env and cwd are only valid with proto STDIO")
		}
	}
	if m.UDS != "" {
		if !filepath.IsAbs(m.UDS) {
			v.problem(label, field("mcp.uds"), "must be an absolute path")
		}
		if m.TLS != nil {
			v.problem(label, field("mcp.tls"), "not supported with a Unix domain socket (mcp.uds)")
		}
	}
	v.reconnect(m.ReconnectAttempts, m.ReconnectDelay, label, field, "mcp")
	v.tls(m.TLS, label, field, "mcp.tls")
}

// mcpProtos are the mcp.proto values the sidecar speaks.
var mcpProtos = []string{ProtoStreamableHTTP, ProtoSSE, ProtoSTDIO}

// stdio checks an mcp section with proto STDIO: exactly one of script (a
// .py or .sh file, run as cpex runs it) and cmd (a non-empty program), no
// url, uds or tls; and says that it runs code from the config.
func (v *validator) stdio(m *MCP, label string, field func(string) string) {
	switch {
	case m.Script == "" && len(m.Cmd) == 0:
		v.problem(label, field("mcp"), "STDIO needs script (a .py or .sh plugin server) or cmd (the program and its arguments)")
	case m.Script != "" && len(m.Cmd) > 0:
		v.problem(label, field("mcp.cmd"), "script and cmd are exclusive")
	case len(m.Cmd) > 0 && strings.TrimSpace(m.Cmd[0]) == "":
		v.problem(label, field("mcp.cmd"), "the first element is the program: it must not be empty")
	case m.Script != "":
		if ext := strings.ToLower(filepath.Ext(m.Script)); ext != ".py" && ext != ".sh" {
			v.problem(label, field("mcp.script"), "must be a .py or .sh file (run with python3 or sh); use cmd for any other program")
		}
	}
	if m.URL != "" {
		v.problem(label, field("mcp.url"), "not used with proto STDIO (the sidecar starts the plugin server itself)")
	}
	if m.UDS != "" {
		v.problem(label, field("mcp.uds"), "not used with proto STDIO")
	}
	if m.TLS != nil {
		v.problem(label, field("mcp.tls"), "only valid for STREAMABLEHTTP and SSE")
	}
	if m.Cwd != "" && !filepath.IsAbs(m.Cwd) {
		v.warn(label, field("mcp.cwd"), "relative: taken from the sidecar's working directory")
	}
	v.warn(label, field("mcp.proto"), "STDIO runs the configured command inside the sidecar's container, with its user and network: for development and small deployments; whoever can edit this config can run code there")
}

// reconnect checks the reconnect_attempts and reconnect_delay of the
// transport section at path.
func (v *validator) reconnect(attempts *int, delay *Seconds, label string, field func(string) string, path string) {
	if attempts != nil && *attempts < 0 {
		v.problem(label, field(path+".reconnect_attempts"), "must not be negative")
	}
	if delay != nil && delay.Duration < 0 {
		v.problem(label, field(path+".reconnect_delay"), "must not be negative")
	}
}

// tls checks a tls section (at path) of a plugin transport.
func (v *validator) tls(t *TLS, label string, field func(string) string, path string) {
	if t == nil {
		return
	}
	v.file(label, field(path+".certfile"), t.CertFile)
	v.file(label, field(path+".keyfile"), t.KeyFile)
	v.file(label, field(path+".ca_bundle"), t.CABundle)
	if t.KeyFile != "" && t.CertFile == "" {
		v.problem(label, field(path+".keyfile"), "requires certfile")
	}
	if !t.VerifyEnabled() {
		v.warn(label, field(path+".verify"), "false: the plugin server's certificate is not verified")
	}
}
