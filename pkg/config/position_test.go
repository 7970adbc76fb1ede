package config

import (
	"errors"
	"strings"
	"testing"
)

// parseProblems parses text and returns its problems (failing the test if
// it loads).
func parseProblems(t *testing.T, text string) []Problem {
	t.Helper()
	_, err := ParseWith([]byte(text), nil, Options{SkipFiles: true})
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Parse(%q) = %v, want a *ValidationError", text, err)
	}
	return ve.Problems
}

// TestSyntaxErrorPositions: a YAML syntax error is reported at the line and
// column of the fault itself, counted from 1 (yaml.v3 reported the start of
// the enclosing block, counted from 0: one line or more too early).
func TestSyntaxErrorPositions(t *testing.T) {
	tests := []struct {
		name, text   string
		line, column int
		message      string
	}{
		{"key indented too little", "plugins:\n  - name: p\n    kind: external\n  mode: x\n", 4, 3, "did not find expected '-' indicator"},
		{"key indented too much", "plugins:\n  - name: p\n     kind: external\n", 3, 10, "mapping values are not allowed"},
		{"tab indentation", "plugins:\n  - name: p\n\tkind: external\n", 3, 1, "tab character"},
		{"dedented key in a mapping", "extproc:\n  max_body_bytes: 1\n mcp_paths: [/mcp]\n", 3, 2, "did not find expected key"},
		{"unclosed flow list", "plugins:\n  - name: p\n    hooks: [tool_pre_invoke\n    kind: external\n", 4, 9, "did not find expected ',' or ']'"},
		{"list item in a mapping", "plugin_settings:\n  plugin_timeout: 3\n- x\n", 3, 1, "did not find expected key"},
		{"second line of the file", "plugins: []\n  extproc: {}\n", 2, 3, "did not find expected key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := parseProblems(t, tt.text)
			if len(ps) != 1 {
				t.Fatalf("problems = %v, want one", ps)
			}
			p := ps[0]
			if p.Line != tt.line || p.Column != tt.column || !strings.Contains(p.Message, tt.message) {
				t.Errorf("got %d:%d %q, want %d:%d %q", p.Line, p.Column, p.Message, tt.line, tt.column, tt.message)
			}
		})
	}
}

// TestProblemLines: problems found after decoding carry the line of the key
// (or list item) they concern, or of the nearest enclosing one.
func TestProblemLines(t *testing.T) {
	text := `plugins:
  - name: first
    kind: external
    hooks:
      - tool_pre_invoke
      - tool_pre_invok
    mcp:
      proto: STREAMABLEHTTP
      url: ftp://x/mcp
  - name: second
    mcp: {proto: STREAMABLEHTTP, url: "http://x:1/mcp"}
    priority: high
extproc:
  forward_headers: [x-ok, "bad header"]
`
	want := map[where]int{
		{"first", "hooks[1]"}:              6,  // the list item itself
		{"first", "mcp.url"}:               9,  // the key
		{"second", "kind"}:                 10, // not in the file: the plugin's entry
		{"second", "priority"}:             12, // a value that did not decode
		{"", "extproc.forward_headers[1]"}: 14, // a flow list: its key
	}
	got := map[where]int{}
	for _, p := range parseProblems(t, text) {
		got[where{p.Plugin, p.Field}] = p.Line
	}
	for w, line := range want {
		if got[w] != line {
			t.Errorf("%+v: line %d, want %d (all: %v)", w, got[w], line, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d problems, want %d: %v", len(got), len(want), got)
	}
}
