package rules

import (
	stdjson "encoding/json"
	"testing"
)

// FuzzCheck feeds arbitrary arguments and names to rules that read them:
// Check never panics, a rule that reads arguments it cannot decode denies,
// and what the Lister hides the call is denied too.
func FuzzCheck(f *testing.F) {
	s, issues := Compile([]Rule{
		{Name: "public-read", Deny: `mcp.name == "read_file" && !mcp.arguments.path.startsWith("/public/")`},
		{Name: "guarded", Deny: `has(mcp.arguments.mode) && mcp.arguments.mode == "force" && !("admin" in identity.roles)`},
		{Name: "admin-tools", Deny: `mcp.name.startsWith("admin_") && !("admin" in identity.roles)`},
		{Name: "numbers", Deny: `has(mcp.arguments.count) && mcp.arguments.count > 100`},
	}, Options{})
	if len(issues) > 0 {
		f.Fatal(issues)
	}
	for _, seed := range []struct{ name, args string }{
		{"read_file", `{"path":"/public/a"}`},
		{"read_file", `{"path":"/etc/passwd"}`},
		{"read_file", `{}`},
		{"echo", `{"mode":"force"}`},
		{"echo", `{"count":1e400}`},
		{"echo", `{"count":"7"}`},
		{"admin_x", `null`},
		{"echo", `[1,2]`},
		{"echo", `{"a":1,"a":2}`},
		{"echo", "{\"path\":\"\xff\"}"},
	} {
		f.Add(seed.name, []byte(seed.args))
	}
	f.Fuzz(func(t *testing.T, name string, args []byte) {
		in := &Input{Method: "tools/call", Name: name, Arguments: args}
		v := s.Check(in)
		var obj map[string]any
		decodes := len(args) == 0 || (stdjson.Unmarshal(args, &obj) == nil && stdjson.Valid(args))
		if !decodes && name == "read_file" && v.Rule == nil {
			t.Errorf("arguments %q do not decode, yet read_file was allowed", args)
		}
		if r, hidden := s.Lister(&Input{Method: "tools/call"}).Hidden(name); hidden {
			if v.Rule == nil {
				t.Errorf("%q hidden by %s, but its call with %q allowed", name, r.Name, args)
			}
		}
	})
}
