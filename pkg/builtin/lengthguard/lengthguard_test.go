package lengthguard

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

func textResult(texts ...string) string {
	items := make([]map[string]any, len(texts))
	for i, t := range texts {
		items[i] = map[string]any{"type": "text", "text": t}
	}
	b, _ := json.Marshal(map[string]any{"name": "t", "result": map[string]any{"content": items}})
	return string(b)
}

// TestDocumentedExamples: the README's examples. Where the README's
// output differs from what ContextForge's code (guards.py) does, the
// code's output is the one asserted, and the README's is noted.
func TestDocumentedExamples(t *testing.T) {
	const hello = "Hello world! This is a test string."
	tests := []struct {
		name    string
		cfg     map[string]any
		payload string
		want    string // the forwarded payload; "" unchanged; "block:<code>" a block
	}{
		{"word boundary at a space (README: \"The quick brown…\")",
			map[string]any{"max_chars": 20, "word_boundary": true}, textResult("The quick brown fox jumps"), textResult("The quick brown …")},
		{"no boundary within 20%: hard cut (README: \"Supercalifragili…\")",
			map[string]any{"max_chars": 20, "word_boundary": true}, textResult("Supercalifragilisticexpialidocious"), textResult("Supercalifragilisti…")},
		{"token truncation (README: \"Hello world! This…\")",
			map[string]any{"limit_mode": "token", "max_tokens": 5, "chars_per_token": 4}, textResult(hello), textResult("Hello world! This is…")},
		{"structured content by tokens", map[string]any{"limit_mode": "token", "max_tokens": 3, "chars_per_token": 4},
			`{"name":"t","result":{"content":[],"structuredContent":{"items":["Hello world! This is a test.","Another long string here."]}}}`,
			`{"name":"t","result":{"content":[],"structuredContent":{"items":["Hello world!…","Another long…"]}}}`},
		{"block by tokens", map[string]any{"limit_mode": "token", "max_tokens": 5, "strategy": "block"}, textResult(hello), "block:OUTPUT_TOKEN_VIOLATION"},
		{"block outputs that are too short", map[string]any{"limit_mode": "character", "min_chars": 100, "strategy": "block"}, textResult("short"), "block:OUTPUT_LENGTH_VIOLATION"},
		{"too short with truncate passes", map[string]any{"min_chars": 100}, textResult("short"), ""},
		{"within bounds", map[string]any{"max_chars": 15000}, textResult(hello), ""},
		{"plain cut with the default ellipsis", map[string]any{"max_chars": 10}, textResult("abcdefghijklmnop"), textResult("abcdefghi…")},
		{"ellipsis longer than the limit", map[string]any{"max_chars": 2, "ellipsis": "..."}, textResult("abcdef"), textResult("ab")},
		{"characters, not bytes", map[string]any{"max_chars": 4, "ellipsis": ""}, textResult("ééééé"), textResult("éééé")},
		{"numbers are exempt", map[string]any{"max_chars": 3}, textResult("123456.5"), ""},
		{"embedded resource text", map[string]any{"max_chars": 5, "ellipsis": ""},
			`{"name":"t","result":{"content":[{"type":"resource","resource":{"uri":"file:///a","text":"abcdefgh"}}]}}`,
			`{"name":"t","result":{"content":[{"type":"resource","resource":{"uri":"file:///a","text":"abcde"}}]}}`},
		{"other fields are not text", map[string]any{"max_chars": 3}, `{"name":"t","result":{"content":[{"type":"image","data":"aGVsbG8gd29ybGQ=","mimeType":"image/png"}]}}`, ""},
		{"token limits ignored in character mode", map[string]any{"max_tokens": 1}, textResult(hello), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.Invoke(context.Background(), cpex.ToolPostInvoke, json.RawMessage(tt.payload), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			switch {
			case res == nil:
			case !res.Continue():
				got = "block:" + res.Violation.Code
				if *res.Violation.HTTPStatusCode != 422 || *res.Violation.MCPErrorCode != -32000 {
					t.Errorf("violation %+v", res.Violation)
				}
			default:
				got = string(res.ModifiedPayload)
			}
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name, problem, warning string
		cfg                    map[string]any
	}{
		{name: "ContextForge's config.yaml", cfg: map[string]any{"min_chars": 0, "max_chars": 15000, "min_tokens": 0, "max_tokens": nil,
			"chars_per_token": 4, "limit_mode": "character", "strategy": "truncate", "ellipsis": "…", "word_boundary": false,
			"max_text_length": 1000000, "max_structure_size": 10000, "max_recursion_depth": 100}},
		{name: "bad strategy", cfg: map[string]any{"strategy": "cut"}, problem: "strategy"},
		{name: "bad mode", cfg: map[string]any{"limit_mode": "words"}, problem: "limit_mode"},
		{name: "chars_per_token 11", cfg: map[string]any{"chars_per_token": 11}, problem: "chars_per_token"},
		{name: "negative max", cfg: map[string]any{"max_chars": -1}, problem: "max_chars"},
		{name: "char limits in token mode", cfg: map[string]any{"limit_mode": "token", "max_chars": 10, "max_tokens": 5}, warning: "limit_mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, issues, err := New(tt.cfg)
			if tt.problem == "" && err != nil || tt.problem != "" && (err == nil || !strings.Contains(err.Error(), tt.problem)) {
				t.Errorf("err %v, want %q", err, tt.problem)
			}
			var warns []string
			for _, is := range issues {
				if is.Warning {
					warns = append(warns, is.Field+": "+is.Message)
				}
			}
			if tt.warning == "" && len(warns) > 0 || tt.warning != "" && (len(warns) != 1 || !strings.HasPrefix(warns[0], tt.warning)) {
				t.Errorf("warnings %q, want %q", warns, tt.warning)
			}
		})
	}
}
