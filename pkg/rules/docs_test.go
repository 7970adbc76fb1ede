package rules

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

// docRules returns the rules of the YAML examples of docs/rules.md, and the
// expressions of its CEL examples.
func docRules(t *testing.T) (rs []Rule, exprs []string) {
	t.Helper()
	text, err := os.ReadFile("../../docs/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```(yaml|cel)\n(.*?)```").FindAllStringSubmatch(string(text), -1)
	for _, b := range blocks {
		if b[1] == "cel" {
			exprs = append(exprs, celExamples(b[2])...)
			continue
		}
		if !strings.Contains(b[2], "deny:") {
			continue // Envoy configuration, not rules
		}
		var doc struct {
			Extproc struct{ Rules []Rule } `yaml:"extproc"`
		}
		if err := yaml.Unmarshal([]byte(b[2]), &doc); err == nil && len(doc.Extproc.Rules) > 0 {
			rs = append(rs, doc.Extproc.Rules...)
			continue
		}
		var list []Rule
		if err := yaml.Unmarshal([]byte(b[2]), &list); err != nil {
			t.Fatalf("a yaml example: %v\n%s", err, b[2])
		}
		rs = append(rs, list...)
	}
	return rs, exprs
}

// celExamples splits a CEL block into expressions: runs of lines between
// comments and blank lines.
func celExamples(block string) []string {
	var out []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	for _, line := range strings.Split(block, "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "//") {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return out
}

// TestDocExamples: every example of docs/rules.md compiles, and the
// worked examples decide as the text says.
func TestDocExamples(t *testing.T) {
	rs, exprs := docRules(t)
	if len(rs) < 8 || len(exprs) < 6 {
		t.Fatalf("found %d rules and %d expressions in docs/rules.md", len(rs), len(exprs))
	}
	for i, e := range exprs {
		if _, issues := Compile([]Rule{{Name: "e", Deny: e}}, Options{}); len(issues) > 0 {
			t.Errorf("expression %d: %v\n%s", i, issues, e)
		}
	}
	byName := map[string]*Set{}
	for _, r := range rs {
		s, issues := Compile([]Rule{r}, Options{})
		if len(issues) > 0 {
			t.Errorf("rule %s: %v", r.Name, issues)
			continue
		}
		byName[r.Name] = s
	}
	call := func(name, args string) *Input {
		in := &Input{Method: "tools/call", Name: name}
		if args != "" {
			in.Arguments = []byte(args)
		}
		return in
	}
	with := func(in *Input, f func(*Input)) *Input { f(in); return in }
	for _, tc := range []struct {
		rule string
		in   *Input
		deny bool
	}{
		{"admins-delete", with(call("delete_file", ""), func(in *Input) { in.Roles = []string{"dev"} }), true},
		{"admins-delete", with(call("delete_file", ""), func(in *Input) { in.Roles = []string{"admin"} }), false},
		{"tenant-tools", with(call("summarize", ""), func(in *Input) { in.Tenant = "acme" }), false},
		{"tenant-tools", with(call("summarize", ""), func(in *Input) { in.Tenant = "globex" }), true},
		{"tenant-tools", with(call("summarize", ""), func(in *Input) { in.Tenant = "" }), true},
		{"tenant-tools", with(&Input{Method: "tools/list"}, func(in *Input) { in.Tenant = "" }), false},
		{"public-files", call("read_file", `{"path":"/public/a.txt"}`), false},
		{"public-files", call("read_file", `{"path":"/public/../etc/passwd"}`), true},
		{"public-files", call("read_file", `{}`), true},
		{"public-files", call("search", `{}`), false},
		{"staging-read-only", with(call("write_file", ""), func(in *Input) {
			in.Headers = func() map[string]string { return map[string]string{"x-gateway-env": "staging"} }
		}), true},
		{"staging-read-only", call("write_file", ""), false},
		{"authenticated-only", &Input{Method: "initialize"}, false},
		{"authenticated-only", &Input{Method: "notifications/initialized"}, false},
		{"authenticated-only", &Input{Method: "tools/list"}, true},
		{"authenticated-only", &Input{Method: "tools/list", User: "u"}, false},
		{"finance-clearance", with(call("export_ledger", ""), func(in *Input) {
			in.Claims = claims(t, map[string]any{"email_verified": true, "clearance": 3})
		}), false},
		{"finance-clearance", with(call("export_ledger", ""), func(in *Input) {
			in.Claims = claims(t, map[string]any{"email_verified": true, "clearance": 2})
		}), true},
		{"finance-clearance", call("export_ledger", ""), true},
	} {
		s := byName[tc.rule]
		if s == nil {
			t.Errorf("no example rule %s", tc.rule)
			continue
		}
		if v := s.Check(tc.in); (v.Rule != nil) != tc.deny {
			t.Errorf("%s on %+v: verdict %+v, want deny %v", tc.rule, tc.in, v, tc.deny)
		}
	}
	// The list behaviour the text describes.
	nonAdmin := &Input{Method: "tools/call", Roles: []string{"dev"}, Tenant: "globex"}
	for _, tc := range []struct {
		rule, item string
		hidden     bool
	}{
		{"admins-delete", "delete_file", true},
		{"admins-delete", "search", false},
		{"tenant-tools", "translate", false},
		{"tenant-tools", "read_file", true},
		{"public-files", "read_file", false},
	} {
		if _, hidden := byName[tc.rule].Lister(nonAdmin).Hidden(tc.item); hidden != tc.hidden {
			t.Errorf("%s: %s hidden %v, want %v", tc.rule, tc.item, hidden, tc.hidden)
		}
	}
}
