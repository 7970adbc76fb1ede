package rules

import (
	"fmt"
	"testing"
)

// benchRules returns n rules of the kinds docs/rules.md shows, none of
// which denies benchInput: per-tool role checks, a tenant allowlist, an
// argument path rule, a header rule, a claims rule.
func benchRules(n int) []Rule {
	kinds := []string{
		`mcp.name == "delete_file_%d" && !("admin" in identity.roles)`,
		`mcp.method == "tools/call" && identity.tenant == "blocked_%d"`,
		`mcp.name == "read_file_%d" && has(mcp.arguments.path) && !mcp.arguments.path.startsWith("/public/")`,
		`request.headers[?"x-env"].orValue("") == "staging_%d" && mcp.name.startsWith("deploy")`,
		`has(identity.claims.level) && identity.claims.level < 0 && mcp.name == "op_%d"`,
	}
	rs := make([]Rule, n)
	for i := range rs {
		rs[i] = Rule{Name: fmt.Sprintf("r%d", i), Deny: fmt.Sprintf(kinds[i%len(kinds)], i)}
	}
	return rs
}

func benchInput(b *testing.B) *Input {
	in := full(b)
	in.Name = "read_file_2"
	in.Arguments = []byte(`{"path":"/public/readme.md","lines":100}`)
	return in
}

func benchSet(b *testing.B, n int) *Set {
	s, issues := Compile(benchRules(n), Options{})
	if len(issues) > 0 {
		b.Fatal(issues)
	}
	return s
}

func BenchmarkCheck(b *testing.B) {
	for _, n := range []int{1, 20} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			s := benchSet(b, n)
			in := benchInput(b)
			if v := s.Check(in); v.Rule != nil {
				b.Fatalf("denied by %s: %v", v.Rule.Name, v.Err)
			}
			b.ReportAllocs()
			for b.Loop() {
				s.Check(in)
			}
		})
	}
}

func BenchmarkLister(b *testing.B) {
	s := benchSet(b, 20)
	in := benchInput(b)
	in.Roles = []string{"dev"}
	names := make([]string, 200)
	for i := range names {
		names[i] = fmt.Sprintf("delete_file_%d", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		l := s.Lister(in)
		for _, name := range names {
			l.Hidden(name)
		}
	}
}

func BenchmarkMayHide(b *testing.B) {
	s := benchSet(b, 20)
	in := benchInput(b)
	in.Method = "tools/call"
	b.ReportAllocs()
	for b.Loop() {
		s.MayHide(in)
	}
}
