package config

import (
	"slices"
	"strings"
	"testing"
)

func TestParseClaimPath(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "sub", want: []string{"sub"}},
		{in: "realm_access.roles", want: []string{"realm_access", "roles"}},
		{in: `["https://acme.example/tenant"]`, want: []string{"https://acme.example/tenant"}},
		{in: `resource_access["my-app"].roles`, want: []string{"resource_access", "my-app", "roles"}},
		{in: `a.["b.c"]`, want: []string{"a", "b.c"}},
		{in: `["say \"hi\" \\ bye"]`, want: []string{`say "hi" \ bye`}},
		{in: "https://x/y", want: []string{"https://x/y"}},
		{in: "", err: "empty claim path"},
		{in: "a.", err: "ends with a dot"},
		{in: ".a", err: "empty name"},
		{in: "a..b", err: "empty name"},
		{in: "a b", err: "must be in a"},
		{in: `a"b`, err: "must be in a"},
		{in: "a]", err: "must be in a"},
		{in: "a[b]", err: "must open"},
		{in: `a["b"`, err: "must close"},
		{in: `a["b`, err: "unterminated"},
		{in: `a[""]`, err: "empty name"},
		{in: `a["\x"]`, err: "bad escape"},
		{in: `["a"]b`, err: "unexpected"},
		{in: strings.Repeat("a.", 16) + "a", err: "more than 16"},
		{in: strings.Repeat("a", 257), err: "longer than"},
	} {
		got, err := ParseClaimPath(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseClaimPath(%q) = %q, %v; want error containing %q", tc.in, got, err, tc.err)
			}
		case err != nil || !slices.Equal(got, tc.want):
			t.Errorf("ParseClaimPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// FuzzParseClaimPath checks that any accepted path survives a round trip
// through its canonical bracketed spelling, and that nothing panics.
func FuzzParseClaimPath(f *testing.F) {
	for _, s := range []string{"sub", "a.b", `["x.y"]`, `a["b\"c"].d`, "a..b", `["`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		names, err := ParseClaimPath(p)
		if err != nil {
			return
		}
		if len(names) == 0 || len(names) > MaxClaimPathSegments {
			t.Fatalf("%q: %d names", p, len(names))
		}
		var b strings.Builder
		for _, n := range names {
			if n == "" {
				t.Fatalf("%q: empty name in %q", p, names)
			}
			b.WriteString(`["`)
			b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(n))
			b.WriteString(`"]`)
		}
		if b.Len() > MaxClaimPathBytes {
			return
		}
		again, err := ParseClaimPath(b.String())
		if err != nil || !slices.Equal(again, names) {
			t.Fatalf("%q → %q → %q, %v", p, names, again, err)
		}
	})
}
