package config

import (
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

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

// ApplyDefaults normalises c and fills in the defaults that do not depend on
// the plugin server: legacy modes become cpex modes (enforce_ignore_error
// also sets on_error: ignore unless on_error is set, as cpex does), mode,
// on_error and proto are case-normalised, "~/" in TLS paths is expanded,
// header names are lower-cased; plugin_settings, mcp and extproc get their
// defaults. Plugin-level keys the plugin server may supply (hooks, mode,
// priority, on_error, conditions) stay unset when unset: read them with the
// Effective* accessors. ApplyDefaults is idempotent.
func (c *Config) ApplyDefaults() {
	for i := range c.Plugins {
		p := &c.Plugins[i]
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
	s := &c.PluginSettings
	if s.PluginTimeout == nil {
		s.PluginTimeout = NewSeconds(DefaultPluginTimeout)
	}
	if s.PluginHealthCheckInterval == nil {
		s.PluginHealthCheckInterval = NewSeconds(DefaultHealthCheckInterval)
	}
	e := &c.Extproc
	if len(e.MCPPaths) == 0 {
		e.MCPPaths = []string{DefaultMCPPath}
	}
	if e.MaxBodyBytes == 0 {
		e.MaxBodyBytes = DefaultMaxBodyBytes
	}
	for _, ch := range e.choices() {
		if *ch.value = strings.ToLower(strings.TrimSpace(*ch.value)); *ch.value == "" {
			*ch.value = ch.values[0]
		}
	}
	e.Attribution.applyDefaults()
	e.UserHeader = lowerHeader(e.UserHeader)
	e.TenantHeader = lowerHeader(e.TenantHeader)
	e.ServerHeader = lowerHeader(e.ServerHeader)
	e.Identity.applyDefaults()
	for i, h := range e.ForwardHeaders {
		e.ForwardHeaders[i] = lowerHeader(h)
	}
	for i := range e.Rules {
		e.Rules[i].Name = strings.TrimSpace(e.Rules[i].Name)
	}
	if e.HookTimeout == nil {
		e.HookTimeout = NewSeconds(s.Timeout() + DefaultHookTimeoutMargin)
	}
}

func ptr[T any](v T) *T { return &v }

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

func lowerHeader(h string) string { return strings.ToLower(strings.TrimSpace(h)) }

// expandHome expands a leading "~/" as Python's Path.expanduser does.
func expandHome(p string) string {
	rest, ok := strings.CutPrefix(p, "~/")
	if !ok {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	return filepath.Join(home, rest)
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

// Timeout is plugin_timeout with its default (30 s): the bound of one
// plugin invocation.
func (s *PluginSettings) Timeout() time.Duration {
	if s == nil || s.PluginTimeout == nil {
		return DefaultPluginTimeout
	}
	return s.PluginTimeout.Duration
}

// HealthCheckInterval is plugin_health_check_interval with its default (60 s).
func (s *PluginSettings) HealthCheckInterval() time.Duration {
	if s == nil || s.PluginHealthCheckInterval == nil {
		return DefaultHealthCheckInterval
	}
	return s.PluginHealthCheckInterval.Duration
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

// HookTimeout is extproc.hook_timeout, or plugin_timeout + 1 s when unset:
// the deadline of one whole hook. Envoy's message_timeout must be larger.
func (c *Config) HookTimeout() time.Duration {
	if c.Extproc.HookTimeout != nil {
		return c.Extproc.HookTimeout.Duration
	}
	return c.PluginSettings.Timeout() + DefaultHookTimeoutMargin
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
