package plugin

import (
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	keys := []Key{{Name: "detect_ssn", Supported: true}, {Name: "words", Supported: true}, {Name: "log_detections", Note: "never logged"}}
	type cfg struct {
		DetectSSN bool     `json:"detect_ssn"`
		Words     []string `json:"words"`
	}
	tests := []struct {
		name string
		in   map[string]any
		want []string // field: message prefix
	}{
		{"all known", map[string]any{"detect_ssn": true, "words": []any{"a"}}, nil},
		{"typo", map[string]any{"detect_sssn": true}, []string{`detect_sssn: unknown key: ignored (did you mean "detect_ssn"?)`}},
		{"far from any key", map[string]any{"colour": 1}, []string{"colour: unknown key: ignored"}},
		{"unsupported", map[string]any{"log_detections": true}, []string{"log_detections: not supported by the built-in plugin: ignored (never logged)"}},
		{"wrong type", map[string]any{"words": "a"}, []string{"words: must be a list, got string"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c cfg
			var got []string
			for _, is := range Decode(tt.in, &c, keys) {
				got = append(got, is.Field+": "+is.Message)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("issues %q, want %q", got, tt.want)
			}
		})
	}
}
