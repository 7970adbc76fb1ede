package searchreplace

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// documented is the config of ContextForge's plugins/config.yaml entry.
var documented = map[string]any{"words": []any{
	map[string]any{"search": "crap", "replace": "crud"},
	map[string]any{"search": "crud", "replace": "yikes"},
}}

func TestSearchReplace(t *testing.T) {
	tests := []struct {
		name    string
		cfg     map[string]any
		hook    cpex.HookType
		payload string
		want    string // "": unchanged
	}{
		{"rules chain in order", documented, cpex.PromptPreFetch,
			`{"prompt_id": "p", "args": {"a": "what crap"}}`, `{"prompt_id": "p", "args": {"a": "what yikes"}}`},
		{"second rule alone", documented, cpex.ToolPreInvoke,
			`{"name": "t", "args": {"a": ["crud", {"b": "no match"}]}}`, `{"name": "t", "args": {"a": ["yikes", {"b": "no match"}]}}`},
		{"no match", documented, cpex.ToolPreInvoke, `{"name": "crap", "args": {"a": "fine"}}`, ""},
		{"tool result", documented, cpex.ToolPostInvoke,
			`{"name": "t", "result": {"content": [{"type": "text", "text": "crap!"}]}}`,
			`{"name": "t", "result": {"content": [{"type": "text", "text": "yikes!"}]}}`},
		{"prompt messages' text only", documented, cpex.PromptPostFetch,
			`{"prompt_id": "p", "result": {"description": "crap", "messages": [{"role": "user", "content": {"type": "text", "text": "crap"}}]}}`,
			`{"prompt_id": "p", "result": {"description": "crap", "messages": [{"role": "user", "content": {"type": "text", "text": "yikes"}}]}}`},
		{"python group references", map[string]any{"words": []any{
			map[string]any{"search": `(\w+)@(?P<dom>\w+)\.com`, "replace": `\1 at \g<dom> ($)`},
		}}, cpex.ToolPreInvoke, `{"name": "t", "args": {"a": "bob@corp.com"}}`, `{"name": "t", "args": {"a": "bob at corp ($)"}}`},
		{"resource hooks are not touched", documented, cpex.ResourcePostFetch, `{"uri": "x", "content": {"text": "crap"}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.Invoke(context.Background(), tt.hook, json.RawMessage(tt.payload), nil)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == "" && res != nil:
				t.Errorf("got %s, want unchanged", res.ModifiedPayload)
			case tt.want != "" && (res == nil || string(res.ModifiedPayload) != tt.want):
				t.Errorf("got %+v, want %s", res, tt.want)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     map[string]any
		problem string
	}{
		{"documented", documented, ""},
		{"no words", map[string]any{}, "words: required"},
		{"missing replace", map[string]any{"words": []any{map[string]any{"search": "a"}}}, "words[0]: search and replace"},
		{"not RE2", map[string]any{"words": []any{map[string]any{"search": "a(?=b)", "replace": ""}}}, "words[0].search: not an RE2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := New(tt.cfg)
			if tt.problem == "" && err != nil || tt.problem != "" && (err == nil || !strings.Contains(err.Error(), tt.problem)) {
				t.Errorf("err %v, want %q", err, tt.problem)
			}
		})
	}
}
