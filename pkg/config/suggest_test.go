package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	hooks := []string{"tool_pre_invoke", "tool_post_invoke", "prompt_pre_fetch"}
	tests := []struct {
		w    string
		list []string
		want string // "": no suggestion
	}{
		{"tool_pre_invok", hooks, "tool_pre_invoke"},
		{"TOOL_POST_INVOKE_", hooks, "tool_post_invoke"},
		{"tool_pre_invoke", hooks, ""}, // exact: nothing to suggest
		{"resource_fetch", hooks, ""},  // too far from all of them
		{"on_eror", []string{"name", "on_error", "mode"}, "on_error"},
		{"mod", []string{"mode", "name"}, "mode"},
		{"x", []string{"mode"}, ""},    // one letter: never a typo of a word
		{"ab", []string{"a", "b"}, ""}, // half the word changed
		{"refuze", []string{"refuse", "pass"}, "refuse"},
		{"", []string{"a"}, ""},
	}
	for _, tt := range tests {
		got, ok := closest(tt.w, tt.list)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("closest(%q) = %q, %v; want %q", tt.w, got, ok, tt.want)
		}
	}
}

// TestDidYouMean: misspelled keys, hooks and enum values name the word
// that was probably meant.
func TestDidYouMean(t *testing.T) {
	text := `plugins:
  - name: p
    kind: extrenal
    hooks: [tool_pre_invok]
    mode: sequental
    on_eror: ignore
    mcp:
      proto: STREAMABLEHTP
      url: http://p:8000/mcp
  - name: q
    kind: external
    on_error: ignor
    mcp: {proto: STREAMABLEHTTP, url: "http://q:8000/mcp"}
plugin_setings: {}
extproc:
  unattributed_responses: refuze
`
	want := []string{
		`line 3: plugin "p": kind: unsupported kind "extrenal": the sidecar runs external plugins and the class paths of its built-in plugins (`,
		`); did you mean "external"?`,
		`line 4: plugin "p": hooks[0]: unknown hook "tool_pre_invok"; did you mean "tool_pre_invoke"?`,
		`(legacy: enforce, permissive, enforce_ignore_error); did you mean "sequential"?`,
		`line 12: plugin "q": on_error: unknown on_error "ignor": want fail, ignore or disable; did you mean "ignore"?`,
		`line 16: extproc.unattributed_responses: must be "refuse" or "pass", got "refuze"; did you mean "refuse"?`,
		// warnings
		`line 6: plugin "p": on_eror: unknown key, ignored; did you mean "on_error"?`,
		`line 14: plugin_setings: unknown key, ignored; did you mean "plugin_settings"?`,
	}
	_, err := Parse([]byte(text), nil)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a *ValidationError", err)
	}
	var all []string
	for _, p := range append(ve.Problems, ve.Warnings...) {
		all = append(all, p.String())
	}
	joined := strings.Join(all, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("missing %q in:\n%s", w, joined)
		}
	}
}

func TestProtoSuggestion(t *testing.T) {
	ps := parseProblems(t, "plugins:\n  - name: p\n    kind: external\n    mcp: {proto: STREAMABLEHTP, url: \"http://p:1/mcp\"}\n")
	if len(ps) != 1 || !strings.HasSuffix(ps[0].Message, `did you mean "STREAMABLEHTTP"?`) {
		t.Errorf("problems = %v", ps)
	}
}

// TestCpexKeysDoNotWarn: keys of cpex's configuration that the sidecar
// ignores load without a warning; a key nobody defines warns.
func TestCpexKeysDoNotWarn(t *testing.T) {
	text := `plugins:
  - name: p
    kind: external
    namespace: security
    mcp: {proto: STREAMABLEHTTP, url: "http://p:1/mcp"}
plugin_settings:
  enable_plugin_api: true
server_settings:
  host: 0.0.0.0
  port: 8000
`
	c, err := Parse([]byte(text), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %v", c.Warnings)
	}
	c, err = Parse([]byte(strings.Replace(text, "namespace", "namespaces", 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0].Message, `did you mean "namespace"?`) {
		t.Errorf("warnings = %v, want one for namespaces", c.Warnings)
	}
}

func TestEmptyFileWarns(t *testing.T) {
	for _, text := range []string{"", "# only a comment\n", "---\n", "~\n"} {
		c, err := Parse([]byte(text), nil)
		if err != nil {
			t.Fatalf("Parse(%q): %v", text, err)
		}
		if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0].Message, "the file is empty") {
			t.Errorf("Parse(%q) warnings = %v, want one: the file is empty", text, c.Warnings)
		}
	}
	c, err := Parse([]byte("plugins: []\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || c.Warnings[0].Field != "plugins" || c.Warnings[0].Line != 1 {
		t.Errorf("empty plugin list: warnings = %v, want one at line 1 for plugins", c.Warnings)
	}
}

// TestSkipFiles: with SkipFiles the TLS files a config names are not
// opened, so a production config checks anywhere; everything else still is.
func TestSkipFiles(t *testing.T) {
	// nemocheck.yaml names testdata/tls/... relative to this directory: from
	// elsewhere, those files are not there.
	data, err := os.ReadFile("testdata/nemocheck.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	if _, err := Parse(data, nil); err == nil || !strings.Contains(err.Error(), "cannot read testdata/tls/ca.pem") {
		t.Fatalf("without SkipFiles: err = %v, want the missing TLS files", err)
	}
	if _, err := ParseWith(data, nil, Options{SkipFiles: true}); err != nil {
		t.Errorf("with SkipFiles: %v", err)
	}
	bad := strings.Replace(string(data), "url: https://pii-filter", "url: ftp://pii-filter", 1)
	if _, err := ParseWith([]byte(bad), nil, Options{SkipFiles: true}); err == nil {
		t.Error("with SkipFiles, a bad url passed")
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadWith(path, Options{SkipFiles: true}); err != nil {
		t.Errorf("LoadWith SkipFiles: %v", err)
	}
}
