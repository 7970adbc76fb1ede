package sidecar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/internal/redistest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// TestBuiltinInChain: a built-in plugin (deny_filter, in ContextForge's
// form) runs in the sidecar's process in one chain with an external
// plugin, ordered by priority, counted by the same metrics.
func TestBuiltinInChain(t *testing.T) {
	guard := plugintest.NewScripted("Guard", cpex.ToolPreInvoke)
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, guard)
	deny := `  - name: DenyListPlugin
    kind: plugins.deny_filter.deny.DenyListPlugin
    hooks: [tool_pre_invoke]
    mode: enforce
    priority: 10
    config:
      words: [innovative, groundbreaking]
`
	sc := startSidecar(t, writeConfig(t, configYAML(deny, pluginEntry("Guard", srv.URL(), "fail", ""))), nil)
	sc.waitReady("Guard", "DenyListPlugin")

	e := refusal(t, sc.call("search", map[string]any{"q": "an Innovative idea"}))
	if !strings.Contains(string(e.Data), `"plugin_name":"DenyListPlugin"`) && !strings.Contains(e.Message+string(e.Data), "DenyListPlugin") {
		t.Errorf("refusal %+v does not name the plugin", e)
	}
	passed(t, sc.call("search", map[string]any{"q": "a plain idea"}))

	m := sc.scrape()
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"plugin", "DenyListPlugin", "hook", "tool_pre_invoke", "outcome", "block"}, 1},
		{[]string{"plugin", "DenyListPlugin", "hook", "tool_pre_invoke", "outcome", "allow"}, 1},
		// The deny list ran first (priority 10): the blocked call never
		// reached the external plugin.
		{[]string{"plugin", "Guard", "hook", "tool_pre_invoke", "outcome", "allow"}, 1},
	} {
		if got := m.value("mcp_extproc_plugin_invocations_total", c.labels...); got != c.want {
			t.Errorf("plugin_invocations_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
}

// contextForgePlugins is a plugins section as ContextForge's
// plugins/config.yaml and the plugins' READMEs write it (class paths,
// legacy mode names, empty conditions), with the hooks of tools/call.
const contextForgePlugins = `plugins:
  - name: "RateLimiterPlugin"
    kind: "cpex_rate_limiter.RateLimiterPlugin"
    version: "0.1.7"
    hooks: ["prompt_pre_fetch", "tool_pre_invoke"]
    tags: ["limits", "throttle"]
    mode: "enforce"
    priority: 20
    conditions: []
    config:
      backend: "memory"
      algorithm: "fixed_window"
      by_user: "3/m"
      by_tenant: "3000/m"
      by_tool: {}
  - name: "PIIFilterPlugin"
    kind: "plugins.pii_filter.pii_filter.PIIFilterPlugin"
    description: "Detects and masks Personally Identifiable Information"
    version: "1.0"
    author: "Security Team"
    hooks: ["prompt_pre_fetch", "prompt_post_fetch", "tool_pre_invoke", "tool_post_invoke"]
    tags: ["security", "pii", "compliance", "filter", "gdpr", "hipaa"]
    mode: "enforce"
    priority: 50
    conditions:
      - prompts: []
        server_ids: []
        tenant_ids: []
    config:
      detect_ssn: true
      detect_credit_card: true
      detect_email: true
      detect_phone: true
      detect_ip_address: true
      default_mask_strategy: "partial"
      redaction_text: "[PII_REDACTED]"
      block_on_detection: false
      include_detection_details: true
      whitelist_patterns:
        - "test@example.com"
        - "555-555-5555"
  - name: "SecretsDetection"
    kind: "cpex_secrets_detection.SecretsDetectionPlugin"
    version: "0.3.9"
    hooks: ["prompt_pre_fetch", "tool_pre_invoke", "tool_post_invoke", "resource_post_fetch"]
    tags: ["security", "secrets", "dlp"]
    mode: "enforce"
    priority: 51
    conditions: []
    config:
      enabled:
        aws_access_key_id: true
        aws_secret_access_key: true
        google_api_key: true
        slack_token: true
        private_key_block: true
        jwt_like: true
        hex_secret_32: true
        base64_24: false
      redact: false
      redaction_text: "***REDACTED***"
      block_on_detection: true
      min_findings_to_block: 1
      field_allowlist: []
      field_denylist: []
  - name: "DenyListPlugin"
    kind: "plugins.deny_filter.deny.DenyListPlugin"
    description: "A plugin that implements a deny list filter."
    version: "0.1"
    author: "ContextForge"
    hooks: ["prompt_pre_fetch", "tool_pre_invoke"]
    tags: ["plugin", "filter", "denylist", "pre-post"]
    mode: "enforce"
    priority: 100
    config:
      words:
        - innovative
        - groundbreaking
        - revolutionary
plugin_settings:
  plugin_timeout: 2
extproc:
  user_header: x-user
`

// TestContextForgeBuiltins: ContextForge's four most used guardrails, in
// the form its docs write them, redact, block and limit through the strict
// fake Envoy with no plugin server running.
func TestContextForgeBuiltins(t *testing.T) {
	sc := startSidecar(t, writeConfig(t, contextForgePlugins), nil)
	sc.waitReady("RateLimiterPlugin", "PIIFilterPlugin", "SecretsDetection", "DenyListPlugin")

	as := func(user string, args map[string]any, result string) *envoytest.Result {
		req := mcpPost(toolCall("search", args))
		req.Headers.Set("X-User", user)
		return sc.exchange(req, func(ctx context.Context, r *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
			return &envoytest.UpstreamResponse{Status: http.StatusOK, Headers: http.Header{"Content-Type": {"application/json"}},
				Body: [][]byte{[]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + result + `"}]}}`)}}, nil
		})
	}
	refused := func(res *envoytest.Result, status int, plugin, code string) {
		t.Helper()
		var body struct {
			Error *rpcError `json:"error"`
		}
		if err := json.Unmarshal(res.Body, &body); err != nil || body.Error == nil || res.Status != status || res.UpstreamRequest != nil {
			t.Fatalf("want a refusal with status %d, got %d %s (upstream called: %v)", status, res.Status, res.Body, res.UpstreamRequest != nil)
		}
		if d := string(body.Error.Data); !strings.Contains(d, `"plugin":"`+plugin+`"`) || !strings.Contains(d, `"code":"`+code+`"`) {
			t.Errorf("refusal %s, want plugin %s code %s", d, plugin, code)
		}
	}

	// Redacted both ways: the SSN before the tool sees it, the e-mail
	// address before the client does; the whitelisted address stays.
	res := as("alice", map[string]any{"q": "My SSN is 123-45-6789"}, "write to bob.smith@corp.io or test@example.com")
	if got := string(res.UpstreamRequest.Body); !strings.Contains(got, `"q":"My SSN is ***-**-6789"`) {
		t.Errorf("upstream got %s, want the SSN masked", got)
	}
	if got := string(res.Body); !strings.Contains(got, `write to b***h@corp.io or test@example.com`) {
		t.Errorf("client got %s, want the address masked", got)
	}
	// Blocked: a secret, a denied word.
	refused(as("alice", map[string]any{"key": "AKIAIOSFODNN7EXAMPLE"}, "ok"), http.StatusOK, "SecretsDetection", "SECRETS_DETECTED")
	refused(as("alice", map[string]any{"q": "a Revolutionary idea"}, "ok"), http.StatusOK, "DenyListPlugin", "deny")

	// The deny list on prompt_pre_fetch, where ContextForge documents it
	// (the rate limiter counts prompts too: Bob's first call).
	prompt := mcpPost([]byte(`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"pitch","arguments":{"tone":"groundbreaking"}}}`))
	prompt.Headers.Set("X-User", "bob")
	refused(sc.exchange(prompt, upstream(nil, nil, nil)), http.StatusOK, "DenyListPlugin", "deny")

	// Limited: three calls a minute per user; Alice has made three.
	res = as("alice", map[string]any{"q": "one more"}, "ok")
	refused(res, http.StatusTooManyRequests, "RateLimiterPlugin", "RATE_LIMIT")
	if res.Headers.Get("Retry-After") == "" || res.Headers.Get("X-RateLimit-Limit") != "3" {
		t.Errorf("429 headers %v, want Retry-After and X-RateLimit-Limit: 3", res.Headers)
	}
	if res := as("carol", map[string]any{"q": "hello"}, "ok"); res.UpstreamRequest == nil || res.Status != http.StatusOK {
		t.Errorf("another user: status %d %s", res.Status, res.Body)
	}
}

// TestRateLimitSharedRedis: two sidecars whose rate_limiter uses one real
// redis-server let N calls a minute through in all, whichever sidecar
// each call reaches, under concurrency.
func TestRateLimitSharedRedis(t *testing.T) {
	srv := redistest.Start(t)
	const limit, calls = 100, 160
	cfg := fmt.Sprintf(`plugins:
  - name: RateLimiterPlugin
    kind: cpex_rate_limiter.RateLimiterPlugin
    hooks: [tool_pre_invoke]
    mode: enforce
    config:
      backend: redis
      redis_url: "redis://%s/0"
      redis_key_prefix: "rl-shared"
      algorithm: fixed_window
      by_user: "%d/m"
plugin_settings:
  plugin_timeout: 2
`, srv.Addr(), limit)
	path := writeConfig(t, cfg)
	sidecars := []*running{startSidecar(t, path, nil), startSidecar(t, path, nil)}
	for _, sc := range sidecars {
		sc.waitReady("RateLimiterPlugin")
	}
	var allowed, limited atomic.Int64
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for w := range 8 {
		sc := sidecars[w%2]
		wg.Go(func() {
			for next.Add(1) <= calls {
				res, err := sc.do(mcpPost(toolCall("search", nil)), upstream(nil, nil, nil))
				switch {
				case err != nil:
					t.Errorf("exchange: %v", err)
				case res.UpstreamRequest != nil && res.Status == http.StatusOK:
					allowed.Add(1)
				case res.Status == http.StatusTooManyRequests:
					limited.Add(1)
				default:
					t.Errorf("status %d %s", res.Status, res.Body)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != limit || limited.Load() != calls-limit {
		t.Errorf("%d calls through two sidecars: %d allowed, %d limited; want %d allowed", calls, got, limited.Load(), limit)
	}
}

// TestReloadBuiltin: a reload that changes a built-in plugin's config
// takes effect; one whose built-in config does not load is rejected and
// the plugin in force stays.
func TestReloadBuiltin(t *testing.T) {
	deny := func(words string) string {
		return configYAML(`  - name: Deny
    kind: plugins.deny_filter.deny.DenyListPlugin
    hooks: [tool_pre_invoke]
    mode: sequential
    config:
      words: ` + words + `
`)
	}
	dir := newConfigMapDir(t, deny("[alpha]"))
	sc := startSidecar(t, dir.path(), nil)
	sc.waitReady("Deny")
	refusal(t, sc.call("t", map[string]any{"q": "alpha"}))
	passed(t, sc.call("t", map[string]any{"q": "beta"}))

	dir.swap(deny("[beta]"))
	sc.waitMetric(1, "mcp_extproc_config_reloads_total", "result", "applied")
	passed(t, sc.call("t", map[string]any{"q": "alpha"}))
	refusal(t, sc.call("t", map[string]any{"q": "beta"}))

	dir.swap(deny("beta")) // not a list: the file does not load
	sc.waitMetric(1, "mcp_extproc_config_reloads_total", "result", "rejected")
	refusal(t, sc.call("t", map[string]any{"q": "beta"}))
}

// TestBuiltinModesAndOnError: a built-in plugin's violations and failures
// follow the entry's mode and on_error as an external plugin's do.
func TestBuiltinModesAndOnError(t *testing.T) {
	entry := func(name, mode, onError string) string {
		return `  - name: ` + name + `
    kind: cpex_pii_filter.PIIFilterPlugin
    hooks: [tool_pre_invoke]
    mode: ` + mode + `
    on_error: ` + onError + `
    conditions: [{tools: [` + name + `]}]
    config: {block_on_detection: true, max_text_bytes: 64}
`
	}
	sc := startSidecar(t, writeConfig(t, configYAML(
		entry("enforced", "enforce", "fail"),
		entry("permissive", "permissive", "fail"),
		entry("failopen", "enforce", "ignore"),
	)), nil)
	sc.waitReady("enforced", "permissive", "failopen")
	long := strings.Repeat("x", 65) // over max_text_bytes: the plugin fails
	for _, tt := range []struct {
		tool, arg string
		refused   bool
		code      int // JSON-RPC code of the refusal
	}{
		{"enforced", "SSN 123-45-6789", true, -32000},   // a block
		{"enforced", long, true, -32603},                // a failure under on_error fail
		{"permissive", "SSN 123-45-6789", false, 0},     // transform: the violation is suppressed
		{"failopen", long, false, 0},                    // on_error ignore: fail open
		{"failopen", "SSN 123-45-6789", true, -32000},   // still blocks
		{"enforced", "nothing personal here", false, 0}, // clean
	} {
		res := sc.call(tt.tool, map[string]any{"q": tt.arg})
		if !tt.refused {
			passed(t, res)
			continue
		}
		if e := refusal(t, res); e.Code != tt.code {
			t.Errorf("%s %q: code %d (%s), want %d", tt.tool, tt.arg, e.Code, e.Message, tt.code)
		}
	}
}
