package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Validate returns every problem of c (nil when it is usable). It checks c
// as it is: call [Config.ApplyDefaults] first for a config built in code.
// TLS files are opened, so validation sees what the process can read now
// (see [Options.SkipFiles] to check without them).
func (c *Config) Validate() []Problem {
	problems, _ := c.Check()
	return problems
}

// Check returns every problem of c and the warnings about it: settings that
// load but are ignored here or look like mistakes. See [Config.Validate].
func (c *Config) Check() (problems, warnings []Problem) { return c.CheckWith(Options{}) }

// CheckWith is [Config.Check] with options.
func (c *Config) CheckWith(o Options) (problems, warnings []Problem) {
	v := &validator{opts: o}
	v.config(c)
	return v.problems, v.warnings
}

type validator struct {
	opts     Options
	problems []Problem
	warnings []Problem
}

func (v *validator) problem(plugin, field, format string, args ...any) {
	v.problems = append(v.problems, Problem{Plugin: plugin, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) warn(plugin, field, format string, args ...any) {
	v.warnings = append(v.warnings, Problem{Plugin: plugin, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) config(c *Config) {
	if len(c.Plugins) == 0 {
		v.warn("", "plugins", "no plugins configured: every message passes unchanged")
	}
	names := map[string]int{}
	for i := range c.Plugins {
		p := &c.Plugins[i]
		// Problems name the plugin; an unnamed one is named by position.
		label, base := p.Name, ""
		if label == "" {
			base = fmt.Sprintf("plugins[%d]", i)
			v.problem("", joinPath(base, "name"), "required")
		} else if j, dup := names[strings.ToLower(label)]; dup {
			v.problem(label, "name", "duplicate: plugins[%d] has the same name (names are compared ignoring case)", j)
		} else {
			names[strings.ToLower(label)] = i
		}
		v.plugin(p, label, base)
	}
	v.settings(&c.PluginSettings)
	v.extproc(&c.Extproc, &c.PluginSettings)
	v.rules(c)
}

func (v *validator) plugin(p *Plugin, label, base string) {
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

// quotedOr writes words as "a" or "b" (or "c").
func quotedOr(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = strconv.Quote(w)
	}
	return strings.Join(q, " or ")
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

// file checks that a TLS file exists, is a regular file and can be read
// (unless the options skip files).
func (v *validator) file(label, field, path string) {
	if path == "" || v.opts.SkipFiles {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		v.problem(label, field, "cannot read %s: %v", path, unwrapPathError(err))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		v.problem(label, field, "cannot read %s: %v", path, unwrapPathError(err))
	case !st.Mode().IsRegular():
		v.problem(label, field, "%s is not a regular file", path)
	}
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func (v *validator) settings(s *PluginSettings) {
	if s.PluginTimeout != nil && s.PluginTimeout.Duration <= 0 {
		v.problem("", "plugin_settings.plugin_timeout", "must be positive")
	}
	if s.PluginHealthCheckInterval != nil && s.PluginHealthCheckInterval.Duration <= 0 {
		v.problem("", "plugin_settings.plugin_health_check_interval", "must be positive")
	}
	if s.ParallelExecutionWithinBand {
		v.warn("", "plugin_settings.parallel_execution_within_band", "ignored: use mode concurrent to run plugins in parallel")
	}
}

func (v *validator) extproc(e *Extproc, s *PluginSettings) {
	for i, p := range e.MCPPaths {
		f := fmt.Sprintf("extproc.mcp_paths[%d]", i)
		switch {
		case !strings.HasPrefix(p, "/"):
			v.problem("", f, "must start with \"/\", got %q", p)
		case strings.ContainsAny(p, "?#"):
			v.problem("", f, "must be a path without query or fragment, got %q", p)
		}
	}
	if e.MaxBodyBytes <= 0 {
		v.problem("", "extproc.max_body_bytes", "must be positive")
	}
	if e.PluginSessions < 0 || e.PluginSessions > MaxPluginSessions {
		v.problem("", "extproc.plugin_sessions", "must be between 0 (default) and %d, got %d", MaxPluginSessions, e.PluginSessions)
	}
	for _, ch := range e.choices() {
		if w := *ch.value; w != "" && !slices.Contains(ch.values, w) {
			v.problem("", ch.field, "must be %s, got %q%s", quotedOr(ch.values), w, didYouMean(w, ch.values))
		}
	}
	for _, h := range []struct{ field, name string }{
		{"extproc.user_header", e.UserHeader},
		{"extproc.tenant_header", e.TenantHeader},
		{"extproc.server_header", e.ServerHeader},
	} {
		if h.name != "" && !validHeaderName(h.name) {
			v.problem("", h.field, "%q is not a valid header name", h.name)
		}
	}
	v.identity(e)
	for i, h := range e.ForwardHeaders {
		f := fmt.Sprintf("extproc.forward_headers[%d]", i)
		switch {
		case !validHeaderName(h):
			v.problem("", f, "%q is not a valid header name", h)
		case IsCredentialHeader(h) && !e.AllowCredentialHeaders:
			v.problem("", f, "%q carries credentials: plugins would see them; set extproc.allow_credential_headers: true to forward it anyway", h)
		case IsCredentialHeader(h):
			v.warn("", f, "%q carries credentials and is forwarded to plugins", h)
		}
	}
	v.attribution(&e.Attribution)
	v.toolPinning(&e.ToolPinning)
	if e.HookTimeout != nil {
		switch {
		case e.HookTimeout.Duration <= 0:
			v.problem("", "extproc.hook_timeout", "must be positive")
		case e.HookTimeout.Duration < s.Timeout():
			v.warn("", "extproc.hook_timeout", "%v is below plugin_timeout %v: the hook deadline cuts a slow plugin before its own timeout does", e.HookTimeout.Duration, s.Timeout())
		}
	}
}

// validHeaderName reports whether h is an HTTP field name (RFC 9110 token),
// or an HTTP/2 pseudo-header such as ":authority".
func validHeaderName(h string) bool {
	h = strings.TrimPrefix(h, ":")
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// sidecarHook reports whether the sidecar dispatches hook h.
func sidecarHook(h cpex.HookType) bool {
	_, ok := cpex.DispatchOf(h)
	return ok
}
