package pii

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/jsonscan"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// prefilterConfigs are the configs mayHold is checked under: the
// defaults, every detector on (the key detectors too), and limits small
// enough for short inputs to reach them (max_text_bytes on its own: any
// payload longer than it is walked).
var prefilterConfigs = []map[string]any{
	{"default_mask_strategy": "partial"},
	{"detect_aws_keys": true, "detect_api_keys": true},
	{"max_nested_depth": 2, "max_collection_items": 3},
	{"max_text_bytes": 24},
}

// TestMayHold: which payloads skip the walk. Every case that may not is
// one thing a pattern or a limit needs.
func TestMayHold(t *testing.T) {
	p := newPlugin(t, map[string]any{"detect_aws_keys": true, "detect_api_keys": true})
	small, short := newPlugin(t, prefilterConfigs[2]), newPlugin(t, prefilterConfigs[3])
	custom := newPlugin(t, map[string]any{"custom_patterns": []any{map[string]any{"pattern": "hello"}}})
	args := func(text string) []byte {
		b, _ := json.Marshal(map[string]any{"name": "echo", "args": map[string]any{"message": text}})
		return b
	}
	tests := []struct {
		name    string
		p       *Plugin
		payload []byte
		want    bool
	}{
		{"clean word", p, args("hello"), false},
		{"clean prose", p, args("The quick brown fox jumps over the lazy dog and reports to the office at nine."), false},
		{"a digit", p, args("room 4"), true},
		{"a number outside any string", p, []byte(`{"name":"echo","args":{"n":4}}`), true},
		{"an at sign", p, args("me@example"), true},
		{"an escape", p, []byte(`{"name":"echo","args":{"m":"\u0040"}}`), true},
		{"a label: passport", p, args("Passport ABCDEFG"), true},
		{"a label in capitals: AKIA", p, args("AKIAABCDEFGHIJKLMNOPQ"), true},
		{"a label: api", p, args("api_key: abcdefghijklmnopqrstuvwxyz"), true},
		{"seven colons after hex digits", p, args("dead:beef:cafe:babe:face:feed:abba:dada"), true},
		{"six of them", p, args("dead:beef:cafe:babe:face:feed:abba"), false},
		{"colons after other letters", p, args("x: y: z: w: v: u: t: s:"), false},
		{"a custom pattern", custom, args("hello"), true},
		{"longer than the prefilter looks", p, args(strings.Repeat("hello ", prefilterMaxBytes/6)), true},
		{"longer than max_text_bytes", short, args("the quick brown fox"), true},
		{"deeper than max_nested_depth", small, []byte(`{"name":"e","args":{"a":[["x"]]}}`), true},
		{"more items than max_collection_items", small, []byte(`{"name":"e","args":{"a":"x","b":"y","c":"z","d":"w"}}`), true},
		{"items counted generously: all the commas", small, []byte(`{"name":"e","args":{"a":"x","b":"y","c":"z"}}`), true},
		{"within the small limits", small, []byte(`{"name":"e","args":{"a":"x"}}`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.mayHold(tt.payload); got != tt.want {
				t.Errorf("mayHold(%s) = %v, want %v", tt.payload, got, tt.want)
			}
		})
	}
}

// FuzzPrefilter checks that skipping the walk never changes an answer:
// for any payload, a plugin that walks every payload and one that may
// skip answer the same, and a payload over a limit fails both. It also
// checks the detector alone: where mayMatch says no, no pattern matches.
func FuzzPrefilter(f *testing.F) {
	for _, s := range []string{
		`{"name":"echo","args":{"message":"hello"}}`,
		`{"name":"t","args":{"q":"Reach me at john@example.com or 555-123-4567, SSN 123-45-6789."}}`,
		`{"name":"t","args":{"q":"dead:beef:cafe:babe:face:feed:abba:dada"}}`,
		`{"name":"t","args":{"q":"Passport: ABCDEFGH","r":"AKIAABCDEFGHIJKLMNOP"}}`,
		`{"name":"t","args":{"q":"My BSN is 123456782","n":[1,2,3]}}`,
		`{"name":"t","args":{"a":[[["x"]]],"b":"\u0031\u0032\u0033-45-6789"}}`,
		`{"name":"t","args":{"q":"api_key: abcdefghijklmnopqrstuvwxyz012345"}}`,
		`{"name":"t","result":{"content":[{"type":"text","text":"DE89370400440532013000"}]}}`,
		// Over the small config's limits, with nothing to find: one item,
		// one level, a few bytes too many.
		`{"name":"t","args":{"a":"x","b":"y","c":"z","d":"w"}}`,
		`{"name":"t","args":{"a":[["x"]]}}`,
		`{"name":"t","args":{"a":"the quick brown fox jumps over"}}`,
	} {
		f.Add([]byte(s))
	}
	var plugins []*Plugin
	for _, cfg := range prefilterConfigs {
		p, _, err := New(cfg)
		if err != nil {
			f.Fatal(err)
		}
		plugins = append(plugins, p.(*Plugin))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		ctx := context.Background()
		for _, p := range plugins {
			text := string(payload)
			if !p.det.mayMatch(text, p.cl) {
				var sc scratch
				if m := p.det.candidates(text, p.cl, &sc); len(m) > 0 {
					t.Fatalf("mayMatch(%q) is false, but %d patterns match", text, len(m))
				}
			}
			for _, hook := range []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke, cpex.PromptPostFetch} {
				p.noPrefilter = true
				walked, werr := p.Invoke(ctx, hook, payload, nil)
				p.noPrefilter = false
				got, err := p.Invoke(ctx, hook, payload, nil)
				switch {
				case werr != nil && (errors.Is(werr, jsonscan.ErrLimit) || errors.Is(werr, errTooLarge)):
					if err == nil {
						t.Fatalf("%s: the walk fails (%v), the prefiltered call does not", hook, werr)
					}
				case werr != nil:
					// Malformed JSON or a duplicate name: refused by the
					// sidecar before and after any plugin (mayHold).
				case err != nil:
					t.Fatalf("%s: the prefiltered call fails (%v), the walk does not", hook, err)
				case !reflect.DeepEqual(got, walked):
					t.Fatalf("%s: prefiltered %+v, walked %+v", hook, got, walked)
				}
			}
		}
	})
}
