package sidecar_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// deniedByRule fails the test unless res is a refusal by rule.
func deniedByRule(t *testing.T, res *envoytest.Result, rule string) {
	t.Helper()
	if e := refusal(t, res); e.Code != -32000 || !strings.Contains(string(e.Data), `"rule":"`+rule+`"`) {
		t.Fatalf("got error %+v, want a refusal by rule %s", e, rule)
	}
}

// TestReloadRules: rules change with a reload; a reload whose rule does not
// compile or type-check is rejected and the rules in force stay.
func TestReloadRules(t *testing.T) {
	guard := plugintest.NewScripted("Guard", cpex.ToolPreInvoke)
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, guard)
	base := configYAML(pluginEntry("Guard", srv.URL(), "fail", ""))
	withRule := func(deny string) string {
		return base + "  rules:\n    - name: no-danger\n      deny: '" + deny + "'\n"
	}
	dir := newConfigMapDir(t, withRule(`mcp.name == "danger"`))
	sc := startSidecar(t, dir.path(), nil)
	sc.waitReady("Guard")
	deniedByRule(t, sc.call("danger", nil), "no-danger")
	passed(t, sc.call("safe", nil))

	rejected := 0.0
	for _, bad := range []string{
		withRule(`mcp.nme == "danger"`),                                     // an undeclared variable
		withRule(`mcp.name + 1`),                                            // does not type-check
		withRule(`mcp.name == "danger" &&`),                                 // does not parse
		strings.Replace(withRule(`true`), "name: no-danger", "name: ''", 1), // no name
	} {
		dir.swap(bad)
		rejected++
		sc.waitMetric(rejected, "mcp_extproc_config_reloads_total", "result", "rejected")
		deniedByRule(t, sc.call("danger", nil), "no-danger")
	}

	dir.swap(withRule(`mcp.name == "other"`))
	sc.waitMetric(1, "mcp_extproc_config_reloads_total", "result", "applied")
	passed(t, sc.call("danger", nil))
	deniedByRule(t, sc.call("other", nil), "no-danger")
	m := sc.scrape()
	if got := m.value("mcp_extproc_rule_decisions_total", "rule", "no-danger", "decision", "deny"); got != 6 {
		t.Errorf("rule_decisions_total{no-danger,deny} = %v, want 6", got)
	}
	// Every call above was checked against the rules, each timed once.
	if got := m.value("mcp_extproc_rule_evaluation_duration_seconds", "phase", "request"); got < 8 {
		t.Errorf("rule_evaluation_duration_seconds{request} has %v samples, want one per call (8)", got)
	}
}

// TestIdentityThroughTheCodec: Envoy forwards the verified JWT on every
// ext_proc message; the sidecar's codec decodes it on the request headers
// only, which is where the identity is read: a rule on identity.user sees
// the JWT's subject, on a body read on the next message.
func TestIdentityThroughTheCodec(t *testing.T) {
	guard := plugintest.NewScripted("Guard", cpex.ToolPreInvoke)
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, guard)
	cfg := configYAML(pluginEntry("Guard", srv.URL(), "fail", "")) + `  identity:
    sources:
      - jwt_metadata: {key: jwt_payload}
  rules:
    - name: alice-only
      deny: 'identity.user != "alice"'
`
	sc := startSidecar(t, writeConfig(t, cfg), nil)
	sc.waitReady("Guard")
	sc.filter.Forwarding = envoytest.Forwarding{MetadataNamespaces: []string{"envoy.filters.http.jwt_authn"}}
	callAs := func(sub string) *envoytest.Result {
		req := mcpPost(toolCall("echo", nil))
		payload, err := structpb.NewStruct(map[string]any{"jwt_payload": map[string]any{"sub": sub}})
		if err != nil {
			t.Fatal(err)
		}
		req.Info.DynamicMetadata = map[string]*structpb.Struct{"envoy.filters.http.jwt_authn": payload}
		res := sc.exchange(req, upstream(nil, nil, nil))
		sent := 0
		for _, m := range res.Sent {
			if m.GetMetadataContext() != nil {
				sent++
			}
		}
		if sent < 2 {
			t.Fatalf("the JWT went with %d messages, want every one (request headers and body)", sent)
		}
		return res
	}
	passed(t, callAs("alice"))
	deniedByRule(t, callAs("mallory"), "alice-only")
}
