package deny

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/plugin"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// documented is the config of ContextForge's deny_filter README.
var documented = map[string]any{"words": []any{"innovative", "groundbreaking", "revolutionary"}}

func TestDeny(t *testing.T) {
	p, issues, err := New(documented)
	if err != nil || len(issues) > 0 {
		t.Fatalf("New: %v %v", issues, err)
	}
	tests := []struct {
		name    string
		hook    cpex.HookType
		payload string
		want    []string // the violation's details, nil: continue
	}{
		{"clean prompt", cpex.PromptPreFetch, `{"prompt_id": "p", "args": {"user": "a plain idea"}}`, nil},
		{"denied word", cpex.PromptPreFetch, `{"prompt_id": "p", "args": {"user": "This is an innovative idea"}}`,
			[]string{"user: contains 'innovative'"}},
		{"ignoring case", cpex.PromptPreFetch, `{"prompt_id": "p", "args": {"user": "REVOLUTIONARY"}}`,
			[]string{"user: contains 'revolutionary'"}},
		{"two words, nested", cpex.ToolPreInvoke, `{"name": "t", "args": {"a": {"b": ["x", "groundbreaking and innovative"]}}}`,
			[]string{"a.b[1]: contains 'innovative'", "a.b[1]: contains 'groundbreaking'"}},
		{"escaped in JSON", cpex.ToolPreInvoke, `{"name": "t", "args": {"q": "\u0069nnovative"}}`,
			[]string{"q: contains 'innovative'"}},
		{"non-ASCII text", cpex.ToolPreInvoke, `{"name": "t", "args": {"q": "très Innovative"}}`,
			[]string{"q: contains 'innovative'"}},
		{"word outside the arguments", cpex.ToolPreInvoke, `{"name": "innovative", "args": {"q": "fine"}}`, nil},
		{"word in a member name only", cpex.ToolPreInvoke, `{"name": "t", "args": {"innovative": 1}}`, nil},
		{"hook it does not implement", cpex.ToolPostInvoke, `{"name": "t", "result": {"content": [{"type": "text", "text": "innovative"}]}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := p.Invoke(context.Background(), tt.hook, json.RawMessage(tt.payload), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				if res != nil {
					t.Fatalf("got %+v, want continue", res)
				}
				return
			}
			if res == nil || res.Continue() || res.Violation == nil {
				t.Fatalf("got %+v, want a block", res)
			}
			v := res.Violation
			if v.Code != "deny" || v.Reason != "Prompt not allowed" {
				t.Errorf("violation %+v", v)
			}
			if got := v.Details["violations"]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("details %v, want %v", got, tt.want)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name     string
		cfg      map[string]any
		problem  string // in the error; "" for none
		warnings []string
	}{
		{"documented", documented, "", nil},
		{"no words", map[string]any{}, "words: required", nil},
		{"empty word", map[string]any{"words": []any{"a", ""}}, "words[1]: empty", nil},
		{"wrong type", map[string]any{"words": "innovative"}, "must be a list", nil},
		{"unknown key", map[string]any{"words": []any{"a"}, "word": []any{"b"}}, "", []string{"word: unknown key"}},
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
			if len(warns) != len(tt.warnings) {
				t.Fatalf("warnings %q, want %q", warns, tt.warnings)
			}
			for i, w := range tt.warnings {
				if !strings.HasPrefix(warns[i], w) {
					t.Errorf("warning %q, want %q", warns[i], w)
				}
			}
		})
	}
}

var _ plugin.Plugin = (*Plugin)(nil)

func BenchmarkDeny1KB(b *testing.B) {
	p, _, err := New(documented)
	if err != nil {
		b.Fatal(err)
	}
	payload := json.RawMessage(`{"name": "search", "args": {"query": "` + strings.Repeat("plain words here ", 58) + `"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if res, _ := p.Invoke(context.Background(), cpex.ToolPreInvoke, payload, nil); res != nil {
			b.Fatal("blocked")
		}
	}
}
