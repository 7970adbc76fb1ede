package config

import (
	"testing"
)

// FuzzParse checks that no input makes Parse panic, and that a config it
// accepts is valid and stable under ApplyDefaults. Seeds: testdata/*.yaml
// and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	getenv := env(map[string]string{"OPA_URL": "http://opa/mcp", "NEMO_HOST": "nemo", "A": "1"})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, getenv)
		if err != nil {
			if c != nil {
				t.Fatal("config returned with an error")
			}
			return
		}
		if problems := c.Validate(); len(problems) > 0 {
			t.Fatalf("accepted config has problems: %v", problems)
		}
		c.ApplyDefaults()
		if problems := c.Validate(); len(problems) > 0 {
			t.Fatalf("ApplyDefaults broke an accepted config: %v", problems)
		}
	})
}

// FuzzExpand checks the two expansion syntaxes never panic, and that text
// without "${" or "{{" passes unchanged.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"${A}", "${A:-x}", "$${A}", "a$b", "{{ env.A }}", "{{ env['A'] | default('b') }}", "# {{ env.B }}", "${", "{{"} {
		f.Add(s)
	}
	getenv := env(map[string]string{"A": "1"})
	f.Fuzz(func(t *testing.T, s string) {
		got, err := expandVars(s, getenv)
		if err == nil && !containsAny(s, "${") && got != s {
			t.Fatalf("expandVars(%q) = %q", s, got)
		}
		text, problems := expandJinja(s, getenv)
		if len(problems) == 0 && !containsAny(s, "{{") && text != s {
			t.Fatalf("expandJinja(%q) = %q", s, text)
		}
	})
}

func containsAny(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
