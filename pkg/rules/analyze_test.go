package rules

import (
	"fmt"
	"strings"
	"testing"

	"cel.dev/cel-go/common/types"
)

// soundnessRules mix guards, arguments, errors and rules without guards.
var soundnessRules = []string{
	`mcp.name == "x"`,
	`"x" == mcp.name && mcp.arguments.missing == 1`,
	`mcp.name in ["x", "y"] && !("admin" in identity.roles)`,
	`mcp.name in ["a", "b", "c", "d", "e", "f", "g", "h", "x"] && identity.user == "bob"`,
	`mcp.name == "x" && mcp.name == "y"`,
	`mcp.method == "tools/call" && mcp.name == "z" && identity.claims.level > 1`,
	`mcp.method in ["prompts/get"] && true`,
	`mcp.name == "x" || mcp.name == "y"`,
	`mcp.name.startsWith("y") && has(mcp.arguments.path)`,
	`mcp.name == "z" && !mcp.arguments.path.startsWith("/public/")`,
	`identity.user == "bob" && request.headers["x"] == "y"`,
	`identity.user == "ann"`,
	`identity.claims.prefix + mcp.name == "q"`, // fails with the name known or not
	`identity.tenant == "acme" && mcp.arguments.missing == 1`,
	`mcp.name.startsWith("x") && identity.tenant in ["acme", "globex"]`,
	`mcp.name.startsWith("w") && mcp.name.startsWith("x")`,
	`"ann" == identity.user && mcp.name.startsWith("")`,
	`mcp.name.startsWith("x") && identity.claims.level > 1`, // fails for every x*
	`mcp.name.startsWith("x") && mcp.name.endsWith("y")`,
	`mcp.name in ["x", "xy"] && mcp.arguments.path == "a"`,
	`mcp.name.startsWith("x") && [1, 2].exists(i, i > 1) && !("admin" in identity.roles)`,
	`mcp.name == "y" && request.headers["x"] == "z"`,
	`mcp.name.startsWith("x") && !("admin" in identity.roles)`,
}

// TestGuardsSound: a rule skipped by its guards is false when run.
func TestGuardsSound(t *testing.T) {
	args := [][]byte{nil, []byte(`{"path":"/public/a"}`), []byte(`{"path":"/etc"}`)}
	for i, deny := range soundnessRules {
		s := compile(t, Options{}, "r", deny)
		c := &s.rules[0]
		skipped := 0
		for _, method := range []string{"tools/call", "prompts/get"} {
			for _, name := range []string{"x", "y", "z", "w", "xy"} {
				for _, a := range args {
					for _, who := range [][2]string{{"bob", ""}, {"ann", "acme"}, {"bob", "initech"}} {
						in := &Input{Method: method, Name: name, Arguments: a, User: who[0], Tenant: who[1], Roles: []string{"dev"}}
						if !c.skips(in) {
							continue
						}
						skipped++
						out, _, err := c.prog.Eval(&activation{set: s, in: in})
						if err != nil || out != types.False {
							t.Errorf("rule %d %s skipped for %s %s %s %v, but gives %v, %v", i, deny, method, name, a, who, out, err)
						}
					}
				}
			}
		}
		if guarded := strings.Contains(deny, "identity.tenant") || strings.Contains(deny, "mcp.name.startsWith"); guarded && skipped == 0 {
			t.Errorf("rule %d %s: never skipped, its guard was not read", i, deny)
		}
	}
}

func TestGuards(t *testing.T) {
	for _, tc := range []struct {
		deny         string
		name, method []string // nil: no guard
	}{
		{`mcp.name == "x" && true`, []string{"x"}, nil},
		{`"x" == mcp.name`, []string{"x"}, nil},
		{`mcp.name in ["b", "a", "b"]`, []string{"a", "b"}, nil},
		{`mcp.method == "tools/call" && (mcp.name == "x" || mcp.name == "y")`, nil, []string{"tools/call"}},
		{`mcp.name == "x" && mcp.name == "y"`, []string{}, nil},
		{`mcp.name in ["x", "y"] && mcp.name == "y"`, []string{"y"}, nil},
		{`mcp.name != "x"`, nil, nil},
		{`!(mcp.name == "x")`, nil, nil},
		{`mcp.name == "x" || true`, nil, nil},
		{`mcp.name in [mcp.method]`, nil, nil},
		{`mcp.name == identity.user`, nil, nil},
	} {
		s := compile(t, Options{}, "r", tc.deny)
		c := &s.rules[0]
		for _, g := range []struct {
			what string
			got  guard
			want []string
		}{{"name", c.name, tc.name}, {"method", c.method, tc.method}} {
			if g.got.set != (g.want != nil) || fmt.Sprint(g.got.list()) != fmt.Sprint(g.want) && g.want != nil {
				t.Errorf("%s: %s guard %+v, want %v", tc.deny, g.what, g.got, g.want)
			}
		}
	}
	many := make([]string, 20)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	g := newGuard(many)
	if g.many == nil || !g.admits("t19") || g.admits("t20") {
		t.Errorf("a guard of 20 values: %+v", g)
	}
}

func TestMetered(t *testing.T) {
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		deny string
		want bool
	}{
		{`mcp.name == "x" && !("admin" in identity.roles)`, false},
		{`has(mcp.arguments.path) && mcp.arguments.path.startsWith("/x") && size(mcp.arguments) > 2`, false},
		{`mcp.arguments.?path.orValue("") == "x"`, false},
		{`mcp.name.matches("^read_")`, false},
		{`mcp.name.split("_")[0].lowerAscii() == "x"`, false},
		{`identity.roles.exists(r, r == "admin")`, true},
		{`identity.roles.all(r, r != "")`, true},
		{`identity.roles.map(r, r + "x") == []`, true},
		{`sets.contains(identity.roles, identity.teams)`, true},
		{`identity.roles.sort() == []`, true},
		{`mcp.name.matches(mcp.arguments.re)`, true},
		{`mcp.name.replace("a", mcp.arguments.s) == ""`, true},
	} {
		a, iss := env.Compile(tc.deny)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		if got := metered(a.NativeRep().Expr()); got != tc.want {
			t.Errorf("metered(%s) = %v, want %v", tc.deny, got, tc.want)
		}
	}
	// An unmetered rule over a large input is not cut by a small limit.
	roles := make([]string, 500)
	for i := range roles {
		roles[i] = fmt.Sprint(i)
	}
	if v := compile(t, Options{CostLimit: 10}, "r", `"admin" in identity.roles`).Check(&Input{Roles: roles}); v.Rule != nil {
		t.Errorf("unmetered rule: %+v", v)
	}
}

// TestListerMatchesReference: Lister.Hidden gives, for every item, what
// evaluating every rule in order on that item's call with mcp.arguments
// unknown gives.
func TestListerMatchesReference(t *testing.T) {
	var nameDeny []string
	for i, r := range soundnessRules {
		nameDeny = append(nameDeny, fmt.Sprintf("r%d", i), r)
	}
	s := compile(t, Options{}, nameDeny...)
	for _, in := range []*Input{
		{Method: "tools/call", User: "bob", Roles: []string{"dev"}},
		{Method: "tools/call", User: "bob", Roles: []string{"admin"}, Headers: func() map[string]string { return map[string]string{"x": "z"} }},
		{Method: "prompts/get", User: "carl"},
		{Method: "resources/read", User: "ann"},
	} {
		l := s.Lister(in)
		for _, name := range []string{"x", "y", "z", "w", "a", "xy", "x1", "ya", "xy"} {
			got, gotHidden := l.Hidden(name)
			want := referenceHidden(s, in, name)
			if gotHidden != (want != nil) || got != want {
				t.Errorf("%s %s as %s: Hidden = %v, %v; want %v", in.Method, name, in.User, got, gotHidden, want)
			}
		}
	}
}

// TestNameGuarded: which rules the Lister judges once for every name their
// guards admit, and the name it judges them by in MayHide.
func TestNameGuarded(t *testing.T) {
	for _, tc := range []struct {
		deny    string
		guarded bool
		sample  string // "": none
	}{
		{`mcp.name == "x" && !("admin" in identity.roles)`, true, "x"},
		{`"x" == mcp.name`, true, "x"},
		{`mcp.name in ["b", "a"] && identity.tenant == "t"`, true, "a"},
		{`mcp.name.startsWith("admin_") && !("admin" in identity.roles)`, true, "admin_"},
		{`mcp.name.startsWith("a") && mcp.name.startsWith("ab") && true`, true, "ab"},
		{`mcp.name.startsWith("a") && mcp.name.startsWith("b")`, true, ""},
		{`mcp.name == "x" && mcp.name == "y"`, true, ""},
		{`mcp.name in ["ab", "b"] && mcp.name.startsWith("b")`, true, "b"},
		{`mcp.name == "x" && mcp.arguments.path == "/"`, true, "x"},
		{`mcp.name.startsWith("x") && mcp.name.endsWith("y")`, false, ""},
		{`mcp.name == "x" || identity.user == "bob"`, false, ""},
		{`mcp.name == "x" && size(mcp.name) > 0`, false, ""},
		{`mcp.name == "x" && [1].exists(i, i > 0)`, false, ""}, // metered
		{`mcp.name != "x"`, false, ""},
		{`mcp.name == identity.user`, false, ""},
		{`identity.user == "bob"`, false, ""},
		{`[{"name": 1}].exists(mcp, mcp.name == 1) && mcp.name == "x"`, false, ""}, // metered
	} {
		c := &compile(t, Options{}, "r", tc.deny).rules[0]
		sample := ""
		if c.sample != nil {
			sample = string(c.sample.(types.String))
		}
		if c.nameGuarded != tc.guarded || sample != tc.sample {
			t.Errorf("%s: name-guarded %v, sample %q; want %v, %q", tc.deny, c.nameGuarded, sample, tc.guarded, tc.sample)
		}
	}
}

// referenceHidden runs every rule's partial program on one item.
func referenceHidden(s *Set, in *Input, name string) *Rule {
	item := *in
	item.Name, item.Arguments = name, nil
	for i := range s.rules {
		c := &s.rules[i]
		p := c.partial
		if p == nil {
			p = c.prog
		}
		out, _, err := p.Eval(&partialActivation{&activation{set: s, in: &item}, s.unknownArgs})
		if err == nil && types.IsUnknown(out) {
			continue
		}
		if deny, _ := denies(out, err); deny {
			return c.rule
		}
	}
	return nil
}
