package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v4"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// env returns a getenv over a fixed map.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// where is the (plugin, field) of a problem, for comparisons.
type where struct{ Plugin, Field string }

func wheres(ps []Problem) map[where]string {
	m := map[where]string{}
	for _, p := range ps {
		m[where{p.Plugin, p.Field}] = p.Message
	}
	return m
}

func mustLoad(t *testing.T, path string) *Config {
	t.Helper()
	c, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	return c
}

func TestLoadContextForgeExternal(t *testing.T) {
	c := mustLoad(t, "testdata/contextforge-external.yaml")

	type row struct {
		Name     string
		Priority int
		Mode     Mode
		OnError  OnError
		URL      string
		Attempts int
		Delay    time.Duration
	}
	var got []row
	for i := range c.Plugins {
		p := &c.Plugins[i]
		got = append(got, row{p.Name, p.EffectivePriority(), p.EffectiveMode(), p.EffectiveOnError(c.PluginSettings),
			p.MCP.URL, p.MCP.Attempts(), p.MCP.Delay()})
	}
	want := []row{
		{"DenyListPlugin", 100, ModeSequential, OnErrorFail, "http://127.0.0.1:3000/mcp", 3, 100 * time.Millisecond},
		{"OPAPluginFilter", 10, ModeSequential, OnErrorFail, "http://opa-plugin:8000/mcp", 3, 100 * time.Millisecond},
		{"LLMGuardPluginInputFilter", 20, ModeSequential, OnErrorFail, "http://llmguard:8001/mcp", 5, 500 * time.Millisecond},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plugins (-want +got):\n%s", diff)
	}
	// Keys the plugin server may supply stay unset locally.
	if p := c.Plugins[0]; p.Priority != nil || p.Mode != "" || p.OnError != "" || p.Hooks != nil {
		t.Errorf("unset keys were filled: %+v", p)
	}
	if c.Plugins[2].Mode != ModeSequential {
		t.Errorf("legacy mode enforce not normalised: %q", c.Plugins[2].Mode)
	}
	if got := c.PluginSettings.Timeout(); got != 30*time.Second {
		t.Errorf("Timeout = %v", got)
	}
	if got := c.PluginSettings.HealthCheckInterval(); got != time.Minute {
		t.Errorf("HealthCheckInterval = %v", got)
	}
	if got := c.HookTimeout(); got != 31*time.Second {
		t.Errorf("HookTimeout = %v, want plugin_timeout + 1s", got)
	}
	if diff := cmp.Diff([]string{"/mcp"}, c.Extproc.MCPPaths); diff != "" {
		t.Errorf("mcp_paths default: %s", diff)
	}
	if c.Extproc.MaxBodyBytes != 1<<20 {
		t.Errorf("max_body_bytes default = %d", c.Extproc.MaxBodyBytes)
	}
	// enable_plugin_api is a cpex key the sidecar ignores: no warning; the
	// ignored parallel setting changes behaviour and deserves one.
	if diff := cmp.Diff([]where{{"", "plugin_settings.parallel_execution_within_band"}}, problemWheres(c.Warnings)); diff != "" {
		t.Errorf("warnings (-want +got):\n%s\n%v", diff, c.Warnings)
	}
}

func TestLoadNemoCheck(t *testing.T) {
	c := mustLoad(t, "testdata/nemocheck.yaml")
	nemo, pii := &c.Plugins[0], &c.Plugins[1]

	if nemo.Mode != ModeSequential || nemo.OnError != OnErrorIgnore {
		t.Errorf("enforce_ignore_error: mode %q on_error %q, want sequential/ignore", nemo.Mode, nemo.OnError)
	}
	if got := nemo.EffectiveOnError(c.PluginSettings); got != OnErrorIgnore {
		t.Errorf("EffectiveOnError = %q", got)
	}
	if diff := cmp.Diff([]cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke}, nemo.Hooks); diff != "" {
		t.Errorf("hooks: %s", diff)
	}
	if diff := cmp.Diff([]string{"fetch", "shell"}, nemo.Conditions[0].Tools); diff != "" {
		t.Errorf("conditions: %s", diff)
	}
	if nemo.AppliedTo == nil {
		t.Error("applied_to dropped")
	}
	if pii.EffectiveMode() != ModeTransform || pii.EffectiveOnError(c.PluginSettings) != OnErrorDisable {
		t.Errorf("PIIFilter: mode %q on_error %q", pii.EffectiveMode(), pii.EffectiveOnError(c.PluginSettings))
	}
	tls := pii.MCP.TLS
	if !tls.VerifyEnabled() || tls.HostnameCheckEnabled() {
		t.Errorf("tls verify=%v check_hostname=%v, want true/false", tls.VerifyEnabled(), tls.HostnameCheckEnabled())
	}
	if c.PluginSettings.Timeout() != 2500*time.Millisecond || c.HookTimeout() != 4*time.Second {
		t.Errorf("timeouts: plugin %v hook %v", c.PluginSettings.Timeout(), c.HookTimeout())
	}
	e := c.Extproc
	gotHeaders := []string{e.UserHeader, e.TenantHeader, e.ServerHeader, e.ForwardHeaders[0], e.ForwardHeaders[1]}
	if diff := cmp.Diff([]string{"x-forwarded-user", "x-tenant", "x-mcp-server", "x-request-id", "user-agent"}, gotHeaders); diff != "" {
		t.Errorf("headers not lower-cased: %s", diff)
	}
	if e.MaxBodyBytes != 2<<20 {
		t.Errorf("max_body_bytes = %d", e.MaxBodyBytes)
	}
	// namespace is a cpex key: accepted silently; capabilities is not one.
	// The legacy identity headers believe the client: each warns.
	want := []where{{"PIIFilter", "capabilities"}, {"PIIFilter", "conditions[0].content_types"},
		{"", "extproc.server_header"}, {"", "extproc.user_header"}, {"", "extproc.tenant_header"}}
	if diff := cmp.Diff(want, problemWheres(c.Warnings)); diff != "" {
		t.Errorf("warnings (-want +got):\n%s\n%v", diff, c.Warnings)
	}
	for _, w := range c.Warnings {
		if w.Line == 0 {
			t.Errorf("warning without a line: %v", w)
		}
	}
}

func TestParseEnv(t *testing.T) {
	data, err := os.ReadFile("testdata/env.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const description = `deny "\$\d{1,}(,\d{1,})*" amounts; price $5; literal ${NOT_EXPANDED}`
	tests := []struct {
		name     string
		env      map[string]string
		plugin0  string
		priority int
		url0     string
		url1     string
		timeout  time.Duration
		failAll  bool
		problems []where // nil: must load
		message  string  // a substring of the first problem
		line     int     // the line of the first problem, if not 0
	}{
		{
			name:     "defaults",
			env:      map[string]string{"OPA_URL": "http://opa:8181/mcp", "NEMO_HOST": "nemo"},
			plugin0:  "OPAPluginFilter",
			priority: 10,
			url0:     "http://opa:8181/mcp",
			url1:     "http://nemo:8000/mcp",
			timeout:  30 * time.Second,
		},
		{
			name: "all set",
			env: map[string]string{"OPA_URL": "https://opa/mcp", "NEMO_HOST": "n", "NEMO_PORT": "9",
				"PLUGIN_NAME": "OPA", "OPA_PRIORITY": "7", "PLUGIN_TIMEOUT": "1.5", "FAIL_CLOSED": "true"},
			plugin0:  "OPA",
			priority: 7,
			url0:     "https://opa/mcp",
			url1:     "http://n:9/mcp",
			timeout:  1500 * time.Millisecond,
			failAll:  true,
		},
		{
			name:     "empty value takes the :- default",
			env:      map[string]string{"OPA_URL": "http://o/mcp", "NEMO_HOST": "h", "OPA_PRIORITY": ""},
			plugin0:  "OPAPluginFilter",
			priority: 10,
			url0:     "http://o/mcp",
			url1:     "http://h:8000/mcp",
			timeout:  30 * time.Second,
		},
		{
			name:     "unset ${VAR}",
			env:      map[string]string{"NEMO_HOST": "nemo"},
			problems: []where{{"OPAPluginFilter", "mcp.url"}},
			message:  "OPA_URL",
		},
		{
			name:     "unset {{ env.VAR }}",
			env:      map[string]string{"OPA_URL": "http://opa/mcp"},
			problems: []where{{"", ""}, {"NemoCheck", "mcp.url"}},
			message:  "NEMO_HOST is not set",
			line:     16,
		},
		{
			name:     "not a number",
			env:      map[string]string{"OPA_URL": "http://opa/mcp", "NEMO_HOST": "n", "OPA_PRIORITY": "high"},
			problems: []where{{"OPAPluginFilter", "priority"}},
			message:  "high",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(data, env(tt.env))
			if tt.problems != nil {
				var ve *ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("err = %v, want a *ValidationError", err)
				}
				if diff := cmp.Diff(tt.problems, problemWheres(ve.Problems)); diff != "" {
					t.Errorf("problems (-want +got):\n%s\n%v", diff, err)
				}
				if !strings.Contains(ve.Problems[0].Message, tt.message) {
					t.Errorf("problem %q does not mention %q", ve.Problems[0], tt.message)
				}
				if tt.line != 0 && ve.Problems[0].Line != tt.line {
					t.Errorf("problem %q: line %d, want %d", ve.Problems[0], ve.Problems[0].Line, tt.line)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p0, p1 := c.Plugins[0], c.Plugins[1]
			if p0.Name != tt.plugin0 || p0.EffectivePriority() != tt.priority || p0.MCP.URL != tt.url0 || p1.MCP.URL != tt.url1 {
				t.Errorf("got name %q priority %d urls %q %q", p0.Name, p0.EffectivePriority(), p0.MCP.URL, p1.MCP.URL)
			}
			if p0.Description != description {
				t.Errorf("description = %q, want %q", p0.Description, description)
			}
			if c.PluginSettings.Timeout() != tt.timeout || c.PluginSettings.FailOnPluginError != tt.failAll {
				t.Errorf("settings: timeout %v fail_on_plugin_error %v", c.PluginSettings.Timeout(), c.PluginSettings.FailOnPluginError)
			}
		})
	}
}

func problemWheres(ps []Problem) []where {
	out := make([]where, len(ps))
	for i, p := range ps {
		out[i] = where{p.Plugin, p.Field}
	}
	return out
}

func TestLoadInvalid(t *testing.T) {
	_, err := Load("testdata/invalid.yaml")
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a *ValidationError", err)
	}
	want := []struct {
		where
		message string
	}{
		{where{"PIIFilterPlugin", "kind"}, `"plugins.summarizer.summarizer.SummarizerPlugin" cannot run in the sidecar: it is not a built-in plugin`},
		{where{"SSEPlugin", "mcp"}, "only valid with proto STDIO"},
		{where{"BadURL", "priority"}, "cannot construct !!str `high` into int"},
		{where{"BadURL", "hooks[1]"}, `unknown hook "tool_pre_invok"`},
		{where{"BadURL", "mode"}, `unknown mode "strict"`},
		{where{"BadURL", "on_error"}, `unknown on_error "explode"`},
		{where{"BadURL", "config"}, "not allowed with kind external"},
		{where{"BadURL", "mcp.url"}, "must be an http(s) URL"},
		{where{"badurl", "name"}, "duplicate: plugins[2] has the same name"},
		{where{"badurl", "mcp"}, "required for an external plugin"},
		{where{"TLSPlugin", "mcp.reconnect_delay"}, "non-negative number of seconds"},
		{where{"TLSPlugin", "mcp.tls.ca_bundle"}, "no such file"},
		{where{"TLSPlugin", "mcp.tls.keyfile"}, "requires certfile"},
		{where{"GRPCPlugin", "unix_socket"}, "only one transport per plugin: grpc, unix_socket"},
		{where{"", "plugins[6].name"}, "required"},
		{where{"", "plugin_settings.plugin_timeout"}, "must be positive"},
		{where{"", "extproc.mcp_paths[0]"}, `must start with "/"`},
		{where{"", "extproc.mcp_paths[1]"}, "without query"},
		{where{"", "extproc.max_body_bytes"}, "must be positive"},
		{where{"", "extproc.forward_headers[0]"}, "carries credentials"},
		{where{"", "extproc.forward_headers[1]"}, "not a valid header name"},
	}
	got := wheres(ve.Problems)
	for _, w := range want {
		msg, ok := got[w.where]
		if !ok {
			t.Errorf("missing problem at %+v", w.where)
			continue
		}
		if !strings.Contains(msg, w.message) {
			t.Errorf("%+v: message %q does not contain %q", w.where, msg, w.message)
		}
	}
	if len(ve.Problems) != len(want) {
		t.Errorf("got %d problems, want %d:\n%v", len(ve.Problems), len(want), err)
	}
	if _, ok := wheres(ve.Warnings)[where{"BadURL", "hooks[2]"}]; !ok {
		t.Errorf("missing warning: agent_pre_invoke never fires; warnings %v", ve.Warnings)
	}
	// The error text names the plugin and field of each problem, one per line.
	if lines := strings.Split(err.Error(), "\n"); len(lines) != len(ve.Problems) {
		t.Errorf("Error() has %d lines for %d problems", len(lines), len(ve.Problems))
	}
	if !strings.Contains(err.Error(), `plugin "BadURL": mcp.url: must be an http(s) URL`) {
		t.Errorf("Error() = %s", err)
	}
}

func TestParseProblems(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		yaml string
		want []where
	}{
		{"empty file loads", "", nil},
		{"comments only", "# nothing\n", nil},
		{"syntax error", "plugins: [\n", []where{{"", ""}}},
		{"not a mapping", "- a\n- b\n", []where{{"", ""}}},
		{"plugins not a list", "plugins: {name: x}\n", []where{{"", "plugins"}}},
		{"key given twice", "plugins:\n- name: a\n  kind: external\n  kind: external\n  mcp: {proto: STREAMABLEHTTP, url: 'http://a/mcp'}\n", []where{{"a", "kind"}}},
		{"stdio fields", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STREAMABLEHTTP, url: 'http://a/mcp', cmd: [python]}\n", []where{{"a", "mcp"}}},
		{"stdio without script or cmd", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STDIO}\n", []where{{"a", "mcp"}}},
		{"stdio script and cmd", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STDIO, script: s.py, cmd: [x]}\n", []where{{"a", "mcp.cmd"}}},
		{"stdio script of another kind", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STDIO, script: s.rb}\n", []where{{"a", "mcp.script"}}},
		{"stdio empty program", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STDIO, cmd: ['']}\n", []where{{"a", "mcp.cmd"}}},
		{"stdio with url", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STDIO, cmd: [x], url: 'http://a/mcp'}\n", []where{{"a", "mcp.url"}}},
		{"stdio with tls", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STDIO, cmd: [x], tls: {verify: false}}\n", []where{{"a", "mcp.tls"}}},
		{"stdio", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STDIO, script: s.py, env: {A: b}, cwd: /srv}\n", nil},
		{"sse", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: SSE, url: 'http://a/sse'}\n", nil},
		{"sse without url", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: SSE}\n", []where{{"a", "mcp.url"}}},
		{"http proto", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: HTTP, url: 'http://a/mcp'}\n", []where{{"a", "mcp.proto"}}},
		{"url without host", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STREAMABLEHTTP, url: 'http:///mcp'}\n", []where{{"a", "mcp.url"}}},
		{"missing url", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STREAMABLEHTTP}\n", []where{{"a", "mcp.url"}}},
		{"relative uds", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STREAMABLEHTTP, url: 'http://a/mcp', uds: run/p.sock}\n", []where{{"a", "mcp.uds"}}},
		{"tls file is a directory", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STREAMABLEHTTP, url: 'https://a/mcp', tls: {ca_bundle: '" + dir + "'}}\n", []where{{"a", "mcp.tls.ca_bundle"}}},
		{"negative attempts", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STREAMABLEHTTP, url: 'http://a/mcp', reconnect_attempts: -1}\n", []where{{"a", "mcp.reconnect_attempts"}}},
		{"missing kind", "plugins:\n- name: a\n  mcp: {proto: STREAMABLEHTTP, url: 'http://a/mcp'}\n", []where{{"a", "kind"}}},
		{"hook_timeout zero", "extproc: {hook_timeout: 0}\n", []where{{"", "extproc.hook_timeout"}}},
		{"timeout as a list", "plugin_settings: {plugin_timeout: [1]}\n", []where{{"", "plugin_settings.plugin_timeout"}}},
		{"credential header allowed", "extproc: {forward_headers: [Cookie], allow_credential_headers: true}\n", nil},
		{"pseudo header", "extproc: {forward_headers: [':authority']}\n", nil},
		{"unknown top-level key", "plugins: []\nfuture_feature: {a: 1}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), nil)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if c == nil {
					t.Fatal("nil config")
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff(tt.want, problemWheres(ve.Problems)); diff != "" {
				t.Errorf("problems (-want +got):\n%s\n%v", diff, err)
			}
		})
	}
}

func TestParseWarnings(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want where
	}{
		{"no plugins", "plugin_settings: {}\n", where{"", "plugins"}},
		{"unknown key", "plugins: []\nfuture_feature: 1\n", where{"", "future_feature"}},
		{"unknown mcp key", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STREAMABLEHTTP, url: 'http://a/mcp', retries: 2}\n", where{"a", "mcp.retries"}},
		{"tls on http", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STREAMABLEHTTP, url: 'http://a/mcp', tls: {verify: true}}\n", where{"a", "mcp.tls"}},
		{"verify off", "plugins:\n- name: a\n  kind: external\n  mcp: {proto: STREAMABLEHTTP, url: 'https://a/mcp', tls: {verify: false}}\n", where{"a", "mcp.tls.verify"}},
		{"agents", "plugins:\n- name: a\n  kind: external\n  conditions: [{agents: [x]}]\n  mcp: {proto: STREAMABLEHTTP, url: 'http://a/mcp'}\n", where{"a", "conditions[0].agents"}},
		{"hook_timeout below plugin_timeout", "plugin_settings: {plugin_timeout: 5}\nextproc: {hook_timeout: 2}\n", where{"", "extproc.hook_timeout"}},
		{"credential header forwarded", "extproc: {forward_headers: [authorization], allow_credential_headers: true}\n", where{"", "extproc.forward_headers[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if _, ok := wheres(c.Warnings)[tt.want]; !ok {
				t.Errorf("missing warning %+v in %v", tt.want, c.Warnings)
			}
		})
	}
}

func TestParseAnchorsAndMerge(t *testing.T) {
	const doc = `
x-base: &base
  kind: external
  mode: audit
  mcp: &mcp
    proto: STREAMABLEHTTP
    url: ${URL}
plugins:
  - <<: *base
    name: a
  - <<: *base
    name: b
    mode: concurrent
`
	c, err := Parse([]byte(doc), env(map[string]string{"URL": "http://p/mcp?x=${Y}"}))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []Mode{ModeAudit, ModeConcurrent} {
		p := c.Plugins[i]
		if p.Kind != KindExternal || p.Mode != want || p.MCP == nil || p.MCP.URL != "http://p/mcp?x=${Y}" {
			t.Errorf("plugin %d = %+v (mcp %+v)", i, p, p.MCP)
		}
	}
}

func TestSecondsYAML(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"30", 30 * time.Second, false},
		{"0.1", 100 * time.Millisecond, false},
		{"1e-3", time.Millisecond, false},
		{"'2'", 2 * time.Second, false},
		{"0", 0, false},
		{"-1", 0, true},
		{"-0.5", 0, true},
		{".nan", 0, true},
		{".inf", 0, true},
		{"abc", 0, true},
		{"[1]", 0, true},
		{"{a: 1}", 0, true},
		{"1e300", 0, true},
		{"true", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var s Seconds
			err := yaml.Unmarshal([]byte(tt.in), &s)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "seconds") {
					t.Errorf("error %q does not say what is wanted", err)
				}
				return
			}
			if s.Duration != tt.want {
				t.Errorf("got %v, want %v", s.Duration, tt.want)
			}
		})
	}
}

func TestSecondsJSON(t *testing.T) {
	var ps PluginSettings
	if err := json.Unmarshal([]byte(`{"plugin_timeout": 2.5, "plugin_health_check_interval": "7"}`), &ps); err != nil {
		t.Fatal(err)
	}
	if ps.Timeout() != 2500*time.Millisecond || ps.HealthCheckInterval() != 7*time.Second {
		t.Errorf("got %v %v", ps.Timeout(), ps.HealthCheckInterval())
	}
	out, err := json.Marshal(ps)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"plugin_timeout":2.5,"plugin_health_check_interval":7}`; string(out) != want {
		t.Errorf("Marshal = %s, want %s", out, want)
	}
	var s Seconds
	for _, bad := range []string{`-1`, `"x"`, `[]`} {
		if err := json.Unmarshal([]byte(bad), &s); !errors.Is(err, ErrBadSeconds) {
			t.Errorf("Unmarshal(%s) = %v, want ErrBadSeconds", bad, err)
		}
	}
}

// TestPluginFromServerJSON decodes the config a Python plugin server returns
// from get_plugin_config (all fields present, nulls included).
func TestPluginFromServerJSON(t *testing.T) {
	const remote = `{"name":"NemoCheck","description":null,"author":"x","kind":"external","namespace":null,
	"version":"0.1.0","hooks":["tool_pre_invoke"],"tags":[],"mode":"sequential","on_error":"fail",
	"priority":100,"conditions":[{"server_ids":null,"tenant_ids":null,"tools":["fetch"],"prompts":null,
	"resources":null,"agents":null,"user_patterns":null,"content_types":null}],"applied_to":null,
	"config":{"k":"v"},"mcp":null}`
	var p Plugin
	if err := json.Unmarshal([]byte(remote), &p); err != nil {
		t.Fatal(err)
	}
	if p.EffectiveMode() != ModeSequential || p.EffectivePriority() != 100 || p.Conditions[0].Tools[0] != "fetch" ||
		len(p.Hooks) != 1 || p.Config["k"] != "v" {
		t.Errorf("decoded %+v", p)
	}
}

func TestExpandVars(t *testing.T) {
	e := env(map[string]string{"A": "alpha", "EMPTY": "", "N": "3"})
	tests := []struct {
		in, want string
		wantErr  string
	}{
		{"plain", "plain", ""},
		{"$ alone and $A and ^a$", "$ alone and $A and ^a$", ""},
		{"${A}", "alpha", ""},
		{"x${A}y${N}", "xalphay3", ""},
		{"${MISSING:-def}", "def", ""},
		{"${EMPTY:-def}", "def", ""},
		{"${EMPTY-def}", "", ""},
		{"${MISSING-def}", "def", ""},
		{"${MISSING:-}", "", ""},
		{"$${A}", "${A}", ""},
		{"$$A", "$$A", ""},
		{`\${1,3}`, "", "bad reference"},
		{"${MISSING}", "", "MISSING is not set"},
		{"${A", "", "unterminated"},
		{"${}", "", "bad reference"},
		{"${A:?msg}", "", "only ${VAR}"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := expandVars(tt.in, e)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestExpandJinja(t *testing.T) {
	e := env(map[string]string{"HOST": "h", "PORT": "80"})
	tests := []struct {
		in, want string
		wantErr  string
	}{
		{"url: {{ env.HOST }}", "url: h", ""},
		{"url: {{env.HOST}}:{{ env['PORT'] }}", "url: h:80", ""},
		{`p: {{ env["PORT"] }}`, "p: 80", ""},
		{"p: {{- env.PORT -}}", "p: 80", ""},
		{"p: {{ env.MISSING | default('9') }}", "p: 9", ""},
		{`p: {{ env.PORT | d("9") }}`, "p: 80", ""},
		{"t: '{{ name }} stays'", "t: '{{ name }} stays'", ""},
		{"# {{ env.MISSING }} in a comment", "# {{ env.MISSING }} in a comment", ""},
		{"a: 1 # {{ env.MISSING }}", "a: 1 # {{ env.MISSING }}", ""},
		{"a: {{ unterminated", "a: {{ unterminated", ""},
		{"a: 1\nb: {{ env.MISSING }}", "", "MISSING is not set"},
		{"a: {{ env.HOST | upper }}", "", "unsupported Jinja expression"},
		{"a: {{ env.get('X') }}", "", "unsupported Jinja expression"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, problems := expandJinja(tt.in, e)
			if tt.wantErr != "" {
				if len(problems) != 1 || !strings.Contains(problems[0].Message, tt.wantErr) {
					t.Fatalf("problems = %v, want one with %q", problems, tt.wantErr)
				}
				return
			}
			if len(problems) > 0 || got != tt.want {
				t.Errorf("got %q %v; want %q", got, problems, tt.want)
			}
		})
	}
}

func TestEffectiveOnError(t *testing.T) {
	strict := PluginSettings{FailOnPluginError: true}
	tests := []struct {
		mode     Mode
		onError  OnError
		settings PluginSettings
		want     OnError
	}{
		{"", "", PluginSettings{}, OnErrorFail},
		{"", OnErrorIgnore, PluginSettings{}, OnErrorIgnore},
		{"", OnErrorDisable, PluginSettings{}, OnErrorDisable},
		{"", OnErrorIgnore, strict, OnErrorFail},
		{"", OnErrorDisable, strict, OnErrorFail},
		{LegacyModeEnforceIgnoreError, "", PluginSettings{}, OnErrorIgnore},
		{LegacyModeEnforceIgnoreError, OnErrorDisable, PluginSettings{}, OnErrorDisable},
		{"", "bogus", PluginSettings{}, OnErrorFail},
		{"", " Ignore ", PluginSettings{}, OnErrorIgnore},
	}
	for _, tt := range tests {
		p := Plugin{Mode: tt.mode, OnError: tt.onError}
		if got := p.EffectiveOnError(tt.settings); got != tt.want {
			t.Errorf("mode %q on_error %q fail_all %v: got %q, want %q", tt.mode, tt.onError, tt.settings.FailOnPluginError, got, tt.want)
		}
	}
}

func TestEffectiveMode(t *testing.T) {
	tests := map[Mode]Mode{
		"":                     ModeSequential,
		"enforce":              ModeSequential,
		"ENFORCE":              ModeSequential,
		"permissive":           ModeTransform,
		"enforce_ignore_error": ModeSequential,
		"audit":                ModeAudit,
		"concurrent":           ModeConcurrent,
		"fire_and_forget":      ModeFireAndForget,
		"disabled":             ModeDisabled,
		"typo":                 ModeSequential,
	}
	for in, want := range tests {
		p := Plugin{Mode: in}
		if got := p.EffectiveMode(); got != want {
			t.Errorf("EffectiveMode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIsMCPPath(t *testing.T) {
	e := Extproc{MCPPaths: []string{"/mcp", "/v1/mcp"}}
	tests := map[string]bool{
		"/mcp":               true,
		"/mcp?session=1":     true,
		"/v1/mcp":            true,
		"/v1/mcp#frag":       true,
		"/mcp/":              true,
		"/MCP":               true,
		"/Mcp/?x=1":          true,
		"/V1/MCP/":           true,
		"/mcp//":             false,
		"/mcpx":              false,
		"/":                  false,
		"":                   false,
		"/other?path=/mcp":   false,
		"/v1/mcp/extra?x=1 ": false,
	}
	for path, want := range tests {
		if got := e.IsMCPPath(path); got != want {
			t.Errorf("IsMCPPath(%q) = %v, want %v", path, got, want)
		}
	}
	if !(&Extproc{}).IsMCPPath("/mcp") || !(&Extproc{}).IsMCPPath("/MCP/") {
		t.Error("unconfigured Extproc does not match the default /mcp")
	}
	if !(&Extproc{MCPPaths: []string{"/api/"}}).IsMCPPath("/API") {
		t.Error("a configured trailing slash is not needed")
	}
	if (&Extproc{MCPPaths: []string{"/"}}).IsMCPPath("") {
		t.Error(`"/" matches ""`)
	}
}

// TestResultPolicies: the policy settings default to fail closed, accept
// their values in any case, and refuse others.
func TestResultPolicies(t *testing.T) {
	c, err := Parse([]byte("plugins: []\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Extproc.RefusesUnattributed() || c.Extproc.UnattributedResponses != UnattributedRefuse {
		t.Errorf("unattributed_responses default %q", c.Extproc.UnattributedResponses)
	}
	if c.Extproc.RefusesUncertainMirror() || c.Extproc.UncertainMirroredHeaders != UncertainRemove {
		t.Errorf("uncertain_mirrored_headers default %q", c.Extproc.UncertainMirroredHeaders)
	}
	c, err = Parse([]byte("plugins: []\nextproc:\n  unattributed_responses: Pass\n  uncertain_mirrored_headers: REFUSE\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Extproc.RefusesUnattributed() || !c.Extproc.RefusesUncertainMirror() {
		t.Errorf("settings not applied: %+v", c.Extproc)
	}
	if _, err := Parse([]byte("plugins: []\nextproc:\n  unattributed_responses: maybe\n"), nil); err == nil {
		t.Error("unattributed_responses: maybe accepted")
	}
	if _, err := Parse([]byte("plugins: []\nextproc:\n  uncertain_mirrored_headers: keep\n"), nil); err == nil {
		t.Error("uncertain_mirrored_headers: keep accepted")
	}
}

func TestProblemString(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{Plugin: "pii", Field: "mcp.url", Message: "must be an http(s) URL"}, `plugin "pii": mcp.url: must be an http(s) URL`},
		{Problem{Field: "extproc.max_body_bytes", Message: "must be positive"}, "extproc.max_body_bytes: must be positive"},
		{Problem{Message: "did not find expected node content", Line: 3, Column: 2}, "line 3, column 2: did not find expected node content"},
		{Problem{Plugin: "pii", Field: "hooks[0]", Message: `unknown hook "x"`, Line: 7}, `line 7: plugin "pii": hooks[0]: unknown hook "x"`},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
	err := &ValidationError{Problems: []Problem{tests[0].p, tests[1].p}}
	if want := tests[0].want + "\n" + tests[1].want; err.Error() != want {
		t.Errorf("Error() = %q", err.Error())
	}
}

func TestApplyDefaultsIdempotent(t *testing.T) {
	c := mustLoad(t, "testdata/nemocheck.yaml")
	before, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	c.ApplyDefaults()
	after, _ := json.Marshal(c)
	if string(before) != string(after) {
		t.Errorf("second ApplyDefaults changed the config:\n%s\n%s", before, after)
	}
	if problems := c.Validate(); problems != nil {
		t.Errorf("Validate after Load: %v", problems)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want ErrNotExist", err)
	}
}

func TestHomeExpansion(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.WriteFile(filepath.Join(home, "ca.pem"), []byte("placeholder"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]byte("plugins:\n- name: a\n  kind: external\n  mcp: {proto: STREAMABLEHTTP, url: 'https://a/mcp', tls: {ca_bundle: ~/ca.pem}}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Plugins[0].MCP.TLS.CABundle; got != filepath.Join(home, "ca.pem") {
		t.Errorf("ca_bundle = %q", got)
	}
}
