package config

import (
	"encoding/json"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/rules"
)

func TestRulesConfig(t *testing.T) {
	const plugin = `plugins:
  - name: guard
    kind: external
    hooks: [tool_pre_invoke]
    mcp: {proto: STREAMABLEHTTP, url: http://127.0.0.1:1/mcp}
`
	for _, tc := range []struct {
		name, yaml string
		problems   []string // substrings, in order
		warnings   []string // of extproc.rules only
	}{
		{name: "valid", yaml: `extproc:
  identity:
    sources:
      - jwt_metadata: {key: p}
  rules:
    - name: admins-delete
      deny: 'mcp.name == "delete_file" && !("admin" in identity.roles)'
      message: only admins may delete files
    - name: public-paths
      deny: |
        mcp.name == "read_file" &&
          !mcp.arguments.path.startsWith("/public/")
`},
		{name: "typo", yaml: `extproc:
  rules:
    - name: admins-delete
      deny: 'mcp.name == "delete_file" && mcp.nme == "x"'
`, problems: []string{`line 9: extproc.rules[0].deny: rule "admins-delete": 1:33: undeclared reference to 'mcp.nme' (did you mean 'mcp.name'?)`}},
		{name: "not bool", yaml: "extproc:\n  rules:\n    - {name: r, deny: 'mcp.name'}\n",
			problems: []string{`line 8: extproc.rules[0].deny: rule "r": must be a bool expression, got string`}},
		{name: "names and deny", yaml: `extproc:
  rules:
    - deny: "true"
    - name: "bad name"
      deny: "true"
    - name: a
      deny: "true"
    - name: A
    - name: b
      deny: "mcp.name =="
`, problems: []string{
			`line 8: extproc.rules[0].name: rules[0]: required`,
			`line 9: extproc.rules[1].name: rule "bad name": must be 1 to 64`,
			`line 13: extproc.rules[3].name: rule "A": duplicate: rules[2]`,
			`line 13: extproc.rules[3].deny: rule "A": required`,
			`line 15: extproc.rules[4].deny: rule "b": 1:12: Syntax error`,
		}},
		{name: "not a list", yaml: "extproc:\n  rules: {name: r}\n", problems: []string{"extproc.rules: want a list"}},
		{name: "unknown key", yaml: "extproc:\n  identity: {sources: [{jwt_metadata: {key: p}}]}\n  rules:\n    - {name: r, deny: 'false', mesage: hi}\n",
			warnings: []string{`line 9: extproc.rules[0].mesage: unknown key, ignored; did you mean "message"?`}},
		{name: "identity not configured", yaml: `extproc:
  rules:
    - name: r
      deny: '!("admin" in identity.roles) || identity.user == "" || mcp.name == "x"'
`, warnings: []string{`extproc.rules[0].deny: rule "r" reads identity.user, identity.roles, always empty here: extproc.identity is not configured`}},
		{name: "legacy user header", yaml: "extproc:\n  user_header: x-user\n  rules:\n    - {name: r, deny: 'identity.user == \"\"'}\n"},
		{name: "legacy user header, tenant", yaml: "extproc:\n  user_header: x-user\n  rules:\n    - {name: r, deny: 'identity.user == \"\" || identity.tenant == \"\"'}\n",
			warnings: []string{`rule "r" reads identity.tenant, always empty`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems, warnings := parseOutcome(t, plugin+tc.yaml)
			match(t, "problem", problems, tc.problems)
			match(t, "warning", only(warnings, "extproc.rules"), tc.warnings)
		})
	}
}

// TestRulesIdentityHook: a plugin that resolves identity, or whose hooks
// its server supplies, silences the warning about empty identity.
func TestRulesIdentityHook(t *testing.T) {
	const rule = "extproc:\n  rules:\n    - {name: r, deny: '\"admin\" in identity.roles'}\n"
	for _, hooks := range []string{"hooks: [http_auth_resolve_user]", "hooks: [identity_resolve, tool_pre_invoke]", ""} {
		cfg, err := Parse([]byte("plugins:\n  - name: p\n    kind: external\n    "+hooks+"\n    mcp: {proto: STREAMABLEHTTP, url: http://127.0.0.1:1/mcp}\n"+rule), nil)
		if err != nil {
			t.Fatal(err)
		}
		if w := only(cfg.Warnings, "extproc.rules"); len(w) > 0 {
			t.Errorf("%q: warnings %v", hooks, w)
		}
	}
	cfg, err := Parse([]byte("plugins:\n  - name: p\n    kind: external\n    mode: disabled\n    hooks: [identity_resolve]\n    mcp: {proto: STREAMABLEHTTP, url: http://127.0.0.1:1/mcp}\n"+rule), nil)
	if err != nil {
		t.Fatal(err)
	}
	if w := only(cfg.Warnings, "extproc.rules"); len(w) != 1 {
		t.Errorf("a disabled identity plugin: warnings %v, want one", w)
	}
}

func TestRulesDecoded(t *testing.T) {
	cfg, err := Parse([]byte("plugins: []\nextproc:\n  rules:\n    - name: ' r1 '\n      deny: mcp.name == \"x\"\n      message: no x\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []rules.Rule{{Name: "r1", Deny: `mcp.name == "x"`, Message: "no x"}}
	if len(cfg.Extproc.Rules) != 1 || cfg.Extproc.Rules[0] != want[0] {
		t.Fatalf("rules %+v, want %+v", cfg.Extproc.Rules, want)
	}
	b, err := json.Marshal(cfg.Extproc.Rules)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != `[{"name":"r1","deny":"mcp.name == \"x\"","message":"no x"}]` {
		t.Errorf("json %s", got)
	}
}
