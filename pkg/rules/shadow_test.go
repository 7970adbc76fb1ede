package rules

import (
	"strings"
	"testing"
)

// TestShadowRules: a shadow rule that would deny never denies nor hides;
// Check names it, and names the enforced rule that does deny after it.
func TestShadowRules(t *testing.T) {
	rs := []Rule{
		{Name: "new-policy", Deny: `mcp.name == "delete_file"`, Mode: ModeShadow},
		{Name: "failing", Deny: `mcp.arguments.missing == 1`, Mode: ModeShadow},
		{Name: "old-policy", Deny: `mcp.name == "drop_table"`},
	}
	s, issues := Compile(rs, Options{})
	if len(issues) > 0 {
		t.Fatal(issues)
	}
	names := func(rs []*Rule) string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name, deny, would string
	}{
		{"delete_file", "", "new-policy,failing"},
		{"drop_table", "old-policy", "failing"},
	} {
		v := s.Check(&Input{Method: "tools/call", Name: tc.name, Arguments: []byte(`{}`)})
		got := ""
		if v.Rule != nil {
			got = v.Rule.Name
		}
		if got != tc.deny || names(v.WouldDeny) != tc.would {
			t.Errorf("%s: denied by %q, would deny %q; want %q, %q", tc.name, got, names(v.WouldDeny), tc.deny, tc.would)
		}
	}
	l := s.Lister(&Input{Method: "tools/call"})
	if r, hidden := l.Hidden("delete_file"); hidden {
		t.Errorf("a shadow rule (%s) hid an item", r.Name)
	}
	if _, hidden := l.Hidden("drop_table"); !hidden {
		t.Error("the enforced rule hid nothing")
	}
	only, _ := Compile(rs[:1], Options{})
	if only.MayHide(&Input{Method: "tools/call"}) {
		t.Error("MayHide with only a shadow rule")
	}
	if _, issues := Compile([]Rule{{Name: "x", Deny: "true", Mode: "audit"}}, Options{}); len(issues) != 1 || issues[0].Field != "mode" {
		t.Errorf("mode audit: issues %v, want one about mode", issues)
	}
}
