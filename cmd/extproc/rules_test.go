package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestCheckConfigRules: --check-config refuses a rule that does not
// compile, naming the rule and the position inside its expression, and
// accepts a good one.
func TestCheckConfigRules(t *testing.T) {
	const rules = `extproc:
  identity:
    sources:
      - jwt_metadata: {key: p}
  rules:
    - name: admins-delete
      deny: 'mcp.name == "delete_file" && !("admin" in identity.%s)'
`
	bad := writeFile(t, validConfig+fmt.Sprintf(rules, "rolez"))
	r := runFor(t, []string{"--config", bad, "--check-config"}, env(nil))
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	want := `:19: extproc.rules[0].deny: rule "admins-delete": 1:51: undeclared reference to 'identity.rolez'`
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
	}

	good := writeFile(t, validConfig+fmt.Sprintf(rules, "roles")+"      message: only admins may delete files\n")
	if r := runFor(t, []string{"--config", good, "--check-config", "--strict"}, env(nil)); r.code != 0 {
		t.Errorf("good rules: exit %d, stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}
