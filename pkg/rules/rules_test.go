package rules

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"google.golang.org/protobuf/types/known/structpb"
)

// compile compiles rules given as name, deny pairs, failing the test on
// any issue.
func compile(t testing.TB, o Options, nameDeny ...string) *Set {
	t.Helper()
	var rs []Rule
	for i := 0; i+1 < len(nameDeny); i += 2 {
		rs = append(rs, Rule{Name: nameDeny[i], Deny: nameDeny[i+1]})
	}
	s, issues := Compile(rs, o)
	if len(issues) > 0 {
		t.Fatalf("Compile: %v", issues)
	}
	return s
}

func claims(t testing.TB, m map[string]any) func() *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return func() *structpb.Struct { return s }
}

// full is an Input with every variable set.
func full(t testing.TB) *Input {
	return &Input{
		Method:    "tools/call",
		Name:      "delete_file",
		Arguments: []byte(`{"path":"/etc/passwd","count":7,"flag":true,"word":"yes","nested":{"list":[1,2,3]}}`),
		User:      "alice",
		Tenant:    "acme",
		Roles:     []string{"dev", "ops"},
		Teams:     []string{"blue"},
		Claims:    claims(t, map[string]any{"email": "alice@acme.example", "groups": []any{"g1", "g2"}, "level": 3}),
		Headers:   func() map[string]string { return map[string]string{"x-env": "prod"} },
		Path:      "/mcp",
		ServerID:  "files",
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		deny    string
		in      *Input // nil: full
		want    bool   // denied
		wantErr string // a substring of Result.Err; "" = no error
	}{
		// Every variable.
		{deny: `mcp.method == "tools/call"`, want: true},
		{deny: `mcp.method == "prompts/get"`, want: false},
		{deny: `mcp.name == "delete_file"`, want: true},
		{deny: `mcp.name.startsWith("read_")`, want: false},
		{deny: `mcp.arguments.path.startsWith("/etc/")`, want: true},
		{deny: `mcp.arguments.count > 5`, want: true}, // a JSON double against an int
		{deny: `mcp.arguments.count == 7`, want: true},
		{deny: `mcp.arguments.count < 7u`, want: false},
		{deny: `mcp.arguments.nested.list.exists(x, x == 3)`, want: true},
		{deny: `size(mcp.arguments) == 0`, want: false},
		{deny: `size(mcp.arguments) == 0`, in: &Input{}, want: true},
		{deny: `size(mcp.arguments) == 0`, in: &Input{Arguments: []byte(`null`)}, want: true},
		{deny: `identity.user == "alice"`, want: true},
		{deny: `identity.tenant != "acme"`, want: false},
		{deny: `!("admin" in identity.roles)`, want: true},
		{deny: `"ops" in identity.roles`, want: true},
		{deny: `identity.teams == ["blue"]`, want: true},
		{deny: `identity.claims.email.endsWith("@acme.example")`, want: true},
		{deny: `"g2" in identity.claims.groups`, want: true},
		{deny: `identity.claims.level >= 3`, want: true},
		{deny: `request.headers["x-env"] == "prod"`, want: true},
		{deny: `request.path == "/mcp"`, want: true},
		{deny: `server.id == "files"`, want: true},
		// Empty values.
		{deny: `identity.user == "" && size(identity.roles) == 0 && size(identity.claims) == 0`, in: &Input{}, want: true},
		{deny: `size(request.headers) == 0`, in: &Input{}, want: true},
		{deny: `size(request.headers) == 0`, in: &Input{Headers: func() map[string]string { return nil }}, want: true},
		// Missing keys fail, and so deny; has() and optionals guard them.
		{deny: `mcp.arguments.missing == "x"`, want: true, wantErr: "no such key: missing"},
		{deny: `identity.claims.missing == "x"`, want: true, wantErr: "no such key"},
		{deny: `request.headers["x-missing"] == "x"`, want: true, wantErr: "no such key"},
		{deny: `has(mcp.arguments.missing) && mcp.arguments.missing == "x"`, want: false},
		{deny: `has(mcp.arguments.path) && mcp.arguments.path.startsWith("/etc/")`, want: true},
		{deny: `has(identity.claims.missing) && identity.claims.missing == "x"`, want: false},
		{deny: `"x-missing" in request.headers && request.headers["x-missing"] == "x"`, want: false},
		{deny: `mcp.arguments.?missing.orValue("") == "x"`, want: false},
		{deny: `mcp.arguments.path.startsWith("/etc/")`, in: &Input{}, want: true, wantErr: "no such key: path"},
		// A logical operator absorbs an error when the other side decides.
		{deny: `mcp.name == "other" && mcp.arguments.missing == "x"`, want: false},
		// A dyn result must be a bool at run time.
		{deny: `mcp.arguments.flag`, want: true},
		{deny: `mcp.arguments.word`, want: true, wantErr: "not a bool"},
		{deny: `mcp.arguments.count`, want: true, wantErr: "not a bool"},
		// Arguments that are not a JSON object deny the rules that read them.
		{deny: `size(mcp.arguments) > 100`, in: &Input{Arguments: []byte(`[1,2]`)}, want: true, wantErr: "not a JSON object"},
		{deny: `size(mcp.arguments) > 100`, in: &Input{Arguments: []byte(`{"a":`)}, want: true, wantErr: "not a JSON object"},
		{deny: `mcp.name == "x"`, in: &Input{Arguments: []byte(`[1,2]`)}, want: false},
		// Extensions.
		{deny: `mcp.name.split("_")[0] == "delete"`, want: true},
		{deny: `sets.intersects(identity.roles, ["ops", "sre"])`, want: true},
		{deny: `identity.roles.sort() == ["dev", "ops"]`, want: true},
		{deny: `mcp.arguments.path.matches("^/(etc|root)/")`, want: true},
	} {
		t.Run(tc.deny, func(t *testing.T) {
			in := tc.in
			if in == nil {
				in = full(t)
			}
			s := compile(t, Options{}, "r", tc.deny)
			v := s.Check(in)
			if got := v.Rule != nil; got != tc.want {
				t.Errorf("denied = %v, want %v (err %v)", got, tc.want, v.Err)
			}
			switch {
			case tc.wantErr == "" && v.Err != nil:
				t.Errorf("err = %v, want none", v.Err)
			case tc.wantErr != "" && (v.Err == nil || !strings.Contains(v.Err.Error(), tc.wantErr)):
				t.Errorf("err = %v, want one with %q", v.Err, tc.wantErr)
			}
			if v.Rule != nil && v.Rule.Name != "r" {
				t.Errorf("rule %q, want r", v.Rule.Name)
			}
		})
	}
}

// TestCheckOrder: the verdict names the first denying rule in config
// order, and later rules are not evaluated.
func TestCheckOrder(t *testing.T) {
	calls := 0
	in := &Input{Name: "x", Headers: func() map[string]string { calls++; return map[string]string{"a": "b"} }}
	s := compile(t, Options{}, "allow", `mcp.name == "y"`, "first", `mcp.name == "x"`, "second", `request.headers.a == "b"`)
	if v := s.Check(in); v.Rule == nil || v.Rule.Name != "first" || v.Err != nil {
		t.Fatalf("verdict %+v, want rule first", v)
	}
	if calls != 0 {
		t.Errorf("headers fetched %d times; no rule before the denying one reads them", calls)
	}
	s = compile(t, Options{}, "a", `request.headers.a == "c"`, "b", `size(request.headers) == 2`, "c", `request.headers.a == "b"`)
	if v := s.Check(in); v.Rule == nil || v.Rule.Name != "c" {
		t.Fatalf("verdict %+v, want rule c", v)
	}
	if calls != 1 {
		t.Errorf("headers fetched %d times, want once", calls)
	}
}

func TestCheckCostLimit(t *testing.T) {
	roles := make([]string, 500)
	for i := range roles {
		roles[i] = "role"
	}
	in := &Input{Roles: roles}
	deny := `identity.roles.exists(r, r == "admin")`
	if v := compile(t, Options{CostLimit: 100}, "r", deny).Check(in); v.Rule == nil || v.Err == nil || !strings.Contains(v.Err.Error(), "cost limit") {
		t.Errorf("over the limit: verdict %+v, want a denial with a cost limit error", v)
	}
	if v := compile(t, Options{}, "r", deny).Check(in); v.Rule != nil {
		t.Errorf("default limit: verdict %+v, want allowed", v)
	}
	quadratic := `identity.roles.exists(r, identity.roles.exists(s, r + s == "admin"))`
	if v := compile(t, Options{}, "r", quadratic).Check(in); v.Rule == nil || v.Err == nil {
		t.Errorf("default limit, quadratic rule: verdict %+v, want a denial with an error", v)
	}
}

func TestNilSet(t *testing.T) {
	var s *Set
	if s.Len() != 0 || s.Reads("mcp") || s.Variables(0) != nil || s.Rule(0) != nil {
		t.Error("nil Set is not empty")
	}
	if v := s.Check(&Input{}); v.Rule != nil || v.Err != nil {
		t.Errorf("nil Set denied: %+v", v)
	}
	if r, h := s.Lister(&Input{}).Hidden("x"); h || r != nil {
		t.Error("nil Set hid an item")
	}
	if s, is := Compile(nil, Options{}); s != nil || is != nil {
		t.Errorf("Compile(nil) = %v, %v; want nil, nil", s, is)
	}
}

func TestReads(t *testing.T) {
	s := compile(t, Options{},
		"a", `has(mcp.arguments.path)`,
		"b", `"admin" in identity.roles`,
		"c", `request.headers["x"] == "y" && mcp.name == "z"`)
	for _, tc := range []struct {
		variable string
		want     bool
	}{
		{"mcp.arguments", true},
		{"mcp.name", true},
		{"mcp", true},
		{"mcp.method", false},
		{"identity", true},
		{"identity.roles", true},
		{"identity.claims", false},
		{"request.headers", true},
		{"request", true},
		{"request.path", false},
		{"server", false},
		{"mcp.arg", false}, // not a prefix of a name part
	} {
		if got := s.Reads(tc.variable); got != tc.want {
			t.Errorf("Reads(%q) = %v, want %v", tc.variable, got, tc.want)
		}
	}
	if got, want := s.Variables(2), []string{"mcp.name", "request.headers"}; !slices.Equal(got, want) {
		t.Errorf("Variables(2) = %v, want %v", got, want)
	}
	if s.Len() != 3 || s.Rule(1).Name != "b" {
		t.Errorf("Len %d, Rule(1) %+v", s.Len(), s.Rule(1))
	}
}

func TestCompileIssues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []Rule
		want  []Issue // Message compared as a substring
	}{
		{"typo", []Rule{{Name: "admins-delete", Deny: `mcp.name == "delete_file" && mcp.nme == "x"`}},
			[]Issue{{Index: 0, Rule: "admins-delete", Field: "deny", Line: 1, Column: 33, Message: "undeclared reference to 'mcp.nme'"}}},
		{"typo on line 2", []Rule{{Name: "r", Deny: "mcp.name == \"x\" &&\n  identity.rolez == []"}},
			[]Issue{{Rule: "r", Field: "deny", Line: 2, Column: 11, Message: "undeclared reference to 'identity.rolez'"}}},
		{"unknown root", []Rule{{Name: "r", Deny: `mcp.name == "x" || reqest.path == "/"`}},
			[]Issue{{Rule: "r", Field: "deny", Line: 1, Column: 26, Message: "undeclared reference to 'reqest.path' (did you mean 'request.path'?)"}}},
		{"unknown under a root", []Rule{{Name: "r", Deny: `true && server.name == "x"`}},
			[]Issue{{Rule: "r", Field: "deny", Line: 1, Column: 9, Message: "undeclared reference to 'server.name': the variables under server are server.id"}}},
		{"syntax", []Rule{{Name: "r", Deny: `mcp.name ==`}},
			[]Issue{{Rule: "r", Field: "deny", Line: 1, Column: 12, Message: "Syntax error"}}},
		{"not bool", []Rule{{Name: "r", Deny: `mcp.name`}},
			[]Issue{{Rule: "r", Field: "deny", Message: "must be a bool expression, got string"}}},
		{"not bool int", []Rule{{Name: "r", Deny: `size(identity.roles)`}},
			[]Issue{{Rule: "r", Field: "deny", Message: "got int"}}},
		{"wrong types", []Rule{{Name: "r", Deny: `identity.roles == "admin"`}},
			[]Issue{{Rule: "r", Field: "deny", Line: 1, Column: 16, Message: "no matching overload"}}},
		{"empty deny", []Rule{{Name: "r", Deny: "  "}},
			[]Issue{{Rule: "r", Field: "deny", Message: "required"}}},
		{"empty name", []Rule{{Deny: "true"}},
			[]Issue{{Field: "name", Message: "required"}}},
		{"bad name", []Rule{{Name: "has space", Deny: "true"}, {Name: "-dash", Deny: "true"}, {Name: strings.Repeat("a", 65), Deny: "true"}},
			[]Issue{{Rule: "has space", Field: "name", Message: "must be"}, {Index: 1, Rule: "-dash", Field: "name", Message: "must be"},
				{Index: 2, Rule: strings.Repeat("a", 65), Field: "name", Message: "must be"}}},
		{"duplicate", []Rule{{Name: "a", Deny: "true"}, {Name: "b", Deny: "true"}, {Name: "A", Deny: "true"}},
			[]Issue{{Index: 2, Rule: "A", Field: "name", Message: "duplicate: rules[0]"}}},
		{"every bad rule", []Rule{{Name: "ok", Deny: "true"}, {Name: "", Deny: "mcp.x"}, {Name: "c", Deny: "1"}},
			[]Issue{{Index: 1, Field: "name", Message: "required"}, {Index: 1, Field: "deny", Line: 1, Column: 1,
				Message: "undeclared reference to 'mcp.x': the variables under mcp are mcp.method, mcp.name, mcp.arguments"},
				{Index: 2, Rule: "c", Field: "deny", Message: "got int"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, got := Compile(tc.rules, Options{})
			if s != nil {
				t.Error("a Set despite issues")
			}
			if len(got) != len(tc.want) {
				t.Fatalf("issues %v, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Index != w.Index || g.Rule != w.Rule || g.Field != w.Field || g.Line != w.Line || g.Column != w.Column || !strings.Contains(g.Message, w.Message) {
					t.Errorf("issue %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestIssueError(t *testing.T) {
	for _, tc := range []struct {
		is   Issue
		want string
	}{
		{Issue{Rule: "admins-delete", Field: "deny", Line: 1, Column: 14, Message: "undeclared reference to 'mcp.nme'"},
			`rule "admins-delete": 1:14: undeclared reference to 'mcp.nme'`},
		{Issue{Index: 2, Field: "name", Message: "required"}, `rules[2]: required`},
	} {
		if got := tc.is.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

// TestCompileKeepsNoReference: the Set does not alias the caller's slice.
func TestCompileKeepsNoReference(t *testing.T) {
	rs := []Rule{{Name: "r", Deny: "true", Message: "m"}}
	s, _ := Compile(rs, Options{})
	rs[0].Name = "changed"
	if v := s.Check(&Input{}); v.Rule == nil || v.Rule.Name != "r" || v.Rule.Message != "m" {
		t.Errorf("verdict %+v, want rule r with its message", v)
	}
}

// TestPartialUnknown: with mcp.arguments unknown, a rule that reads them
// evaluates to unknown, not to an error or a bool.
func TestPartialUnknown(t *testing.T) {
	s := compile(t, Options{}, "r", `!mcp.arguments.path.startsWith("/public/")`)
	c := &s.rules[0]
	if c.partial == nil {
		t.Fatal("no partial program for a rule that reads mcp.arguments")
	}
	out, _, err := c.partial.Eval(&partialActivation{&activation{set: s, in: &Input{}}, s.unknownArgs})
	if err != nil || !types.IsUnknown(out) {
		t.Fatalf("partial eval = %v, %v; want unknown", out, err)
	}
	// The plain program, on the same empty input, fails instead.
	if _, _, err := c.prog.Eval(&activation{set: s, in: &Input{}}); err == nil {
		t.Fatal("plain eval without the key did not fail")
	}
}

func TestLister(t *testing.T) {
	nonAdmin := &Input{Method: "tools/call", User: "bob", Roles: []string{"dev"}}
	admin := &Input{Method: "tools/call", User: "ann", Roles: []string{"admin"}}
	for _, tc := range []struct {
		name   string
		rules  []string // name, deny pairs
		in     *Input
		hidden map[string]string // item → the rule that hides it; items not listed are shown
	}{
		{"arguments unknown hide nothing", []string{"r", `mcp.name == "x" && !mcp.arguments.path.startsWith("/public/")`}, nonAdmin, nil},
		{"has() of an unknown hides nothing", []string{"r", `has(mcp.arguments.path)`}, nonAdmin, nil},
		{"non-admin", []string{"r", `mcp.name == "x" && !("admin" in identity.roles)`}, nonAdmin, map[string]string{"x": "r"}},
		{"admin", []string{"r", `mcp.name == "x" && !("admin" in identity.roles)`}, admin, nil},
		{"decided without arguments", []string{"r", `mcp.name == "x" || mcp.arguments.path == "/"`}, nonAdmin, map[string]string{"x": "r"}},
		{"false without arguments", []string{"r", `mcp.name == "x" && mcp.arguments.path == "/"`}, nonAdmin, nil},
		{"independent of the name", []string{"r", `identity.user == "bob"`}, nonAdmin, map[string]string{"x": "r", "y": "r", "z": "r"}},
		{"independent, arguments", []string{"r", `identity.user == "bob" && has(mcp.arguments.a)`}, nonAdmin, nil},
		{"method is the call's", []string{"r", `mcp.method == "tools/call" && mcp.name == "y"`}, nonAdmin, map[string]string{"y": "r"}},
		{"error hides", []string{"r", `mcp.name == "z" && identity.claims.level > 2`}, nonAdmin, map[string]string{"z": "r"}},
		{"error hides, independent", []string{"r", `identity.claims.level > 2`}, nonAdmin, map[string]string{"x": "r", "y": "r", "z": "r"}},
		{"first rule in order", []string{
			"a", `mcp.name == "y"`,
			"b", `identity.user == "bob"`,
			"c", `mcp.name == "x"`,
		}, nonAdmin, map[string]string{"x": "b", "y": "a", "z": "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := compile(t, Options{}, tc.rules...)
			in := *tc.in
			in.Name, in.Arguments = "ignored", []byte(`{"path":"/public/a","a":1}`)
			l := s.Lister(&in)
			for _, item := range []string{"x", "y", "z"} {
				r, hidden := l.Hidden(item)
				want, wantHidden := tc.hidden[item]
				switch {
				case hidden != wantHidden:
					t.Errorf("Hidden(%q) = %v, want %v", item, hidden, wantHidden)
				case hidden && (r == nil || r.Name != want):
					t.Errorf("Hidden(%q) by %+v, want rule %q", item, r, want)
				case !hidden && r != nil:
					t.Errorf("Hidden(%q) shown with rule %+v", item, r)
				}
			}
		})
	}
}

// TestListerCallStillChecked: an item a rule on arguments keeps visible is
// still refused when called with arguments the rule denies.
func TestListerCallStillChecked(t *testing.T) {
	s := compile(t, Options{}, "r", `mcp.name == "x" && !mcp.arguments.path.startsWith("/public/")`)
	if _, hidden := s.Lister(&Input{Method: "tools/call"}).Hidden("x"); hidden {
		t.Fatal("x hidden")
	}
	if v := s.Check(&Input{Method: "tools/call", Name: "x", Arguments: []byte(`{"path":"/secret"}`)}); v.Rule == nil {
		t.Error("call with a denied path allowed")
	}
	if v := s.Check(&Input{Method: "tools/call", Name: "x", Arguments: []byte(`{"path":"/public/a"}`)}); v.Rule != nil {
		t.Errorf("call with an allowed path denied: %+v", v)
	}
}

func TestDenies(t *testing.T) {
	for _, tc := range []struct {
		out  ref.Val
		err  error
		deny bool
		msg  string // a substring of the error; "" = none
	}{
		{types.True, nil, true, ""},
		{types.False, nil, false, ""},
		{types.String("x"), nil, true, "not a bool"},
		{types.NewUnknown(1, nil), nil, true, "unknown"},
		{nil, errors.New("boom"), true, "boom"},
	} {
		deny, err := denies(tc.out, tc.err)
		if deny != tc.deny || (err == nil) != (tc.msg == "") || err != nil && !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("denies(%v, %v) = %v, %v; want %v, %q", tc.out, tc.err, deny, err, tc.deny, tc.msg)
		}
	}
}

// TestConcurrentUse: one Set serves many requests at once (run with -race).
func TestConcurrentUse(t *testing.T) {
	s := compile(t, Options{}, "a", `mcp.name == "x" && !("admin" in identity.roles)`,
		"b", `has(mcp.arguments.path) && !mcp.arguments.path.startsWith("/public/")`,
		"c", `request.headers[?"x"].orValue("") == "deny"`)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				in := &Input{Method: "tools/call", Name: "x", Roles: []string{"dev"}, Arguments: []byte(`{"path":"/public/p"}`)}
				if g%2 == 0 {
					in.Roles = []string{"admin"}
				}
				v := s.Check(in)
				if want := g%2 != 0; (v.Rule != nil) != want {
					t.Errorf("goroutine %d, call %d: verdict %+v", g, i, v)
					return
				}
				if _, hidden := s.Lister(in).Hidden("x"); hidden != (g%2 != 0) {
					t.Errorf("goroutine %d, call %d: hidden %v", g, i, hidden)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestArgumentsStrict: arguments with a key given twice, which servers may
// read either way, fail the rules that read them.
func TestArgumentsStrict(t *testing.T) {
	s := compile(t, Options{}, "r", `has(mcp.arguments.path) && mcp.arguments.path == "/etc"`)
	if v := s.Check(&Input{Arguments: []byte(`{"path":"/ok","path":"/etc"}`)}); v.Rule == nil || v.Err == nil {
		t.Errorf("duplicate key: verdict %+v, want a denial with an error", v)
	}
}

func TestMayHide(t *testing.T) {
	s, issues := Compile([]Rule{
		{Name: "admins-delete", Deny: `mcp.name == "delete_file" && !("admin" in identity.roles)`},
		{Name: "prompts-only-for-writers", Deny: `mcp.method == "prompts/get" && !("writer" in identity.roles)`},
		{Name: "suspended", Deny: `identity.tenant == "suspended"`},
	}, Options{})
	if len(issues) > 0 {
		t.Fatal(issues)
	}
	for _, tc := range []struct {
		name string
		in   Input
		want bool
	}{
		{"an admin sees every tool", Input{Method: "tools/call", Roles: []string{"admin"}}, false},
		{"a developer may miss delete_file", Input{Method: "tools/call", Roles: []string{"dev"}}, true},
		{"an admin may miss prompts", Input{Method: "prompts/get", Roles: []string{"admin"}}, true},
		// admins-delete names no method: a prompt called delete_file is
		// hidden too, from all but admins.
		{"a writer may miss a prompt called delete_file", Input{Method: "prompts/get", Roles: []string{"writer"}}, true},
		{"an admin writer sees every prompt", Input{Method: "prompts/get", Roles: []string{"writer", "admin"}}, false},
		{"a suspended tenant sees nothing", Input{Method: "resources/read", Tenant: "suspended"}, true},
		{"nothing hides resources from an admin of another tenant", Input{Method: "resources/read", Tenant: "acme", Roles: []string{"admin"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.MayHide(&tc.in); got != tc.want {
				t.Errorf("MayHide = %v, want %v", got, tc.want)
			}
			// MayHide must agree with the Lister on an item it would hide.
			if l := s.Lister(&tc.in); !tc.want {
				for _, name := range []string{"delete_file", "echo", "x"} {
					if r, hidden := l.Hidden(name); hidden {
						t.Errorf("MayHide false, but %s hides %q", r.Name, name)
					}
				}
			}
		})
	}
	var none *Set
	if none.MayHide(&Input{Method: "tools/call"}) {
		t.Error("no rules may hide")
	}
}
