package builtin

import (
	"os"
	"strings"
	"testing"
)

// TestDocumentation: docs/builtin-plugins.md has a section per plugin that
// names each of its kinds and hooks, and a row per config key saying
// whether it is supported.
func TestDocumentation(t *testing.T) {
	raw, err := os.ReadFile("../../docs/builtin-plugins.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	for _, sec := range strings.Split(string(raw), "\n## ")[1:] {
		name, body, _ := strings.Cut(sec, "\n")
		sections[strings.TrimSpace(name)] = body
	}
	for _, s := range Specs() {
		body, ok := sections[s.Name]
		if !ok {
			t.Errorf("no section for %s", s.Name)
			continue
		}
		for _, k := range s.Kinds {
			if !strings.Contains(body, "`"+k+"`") {
				t.Errorf("%s: kind %s not documented", s.Name, k)
			}
		}
		for _, h := range s.Hooks {
			if !strings.Contains(body, "`"+string(h)+"`") {
				t.Errorf("%s: hook %s not documented", s.Name, h)
			}
		}
		for _, k := range s.Keys {
			want := "| `" + k.Name + "` | yes |"
			if !k.Supported {
				want = "| `" + k.Name + "` | **no**"
			}
			if !strings.Contains(body, want) {
				t.Errorf("%s: no row %q", s.Name, want)
			}
		}
	}
}
