package config

import (
	"errors"
	"strings"
	"testing"
)

// TestBuiltinKinds checks what --check-config says about entries whose
// kind is a class path: built in, external behind a transport, or neither.
func TestBuiltinKinds(t *testing.T) {
	const head = "plugins:\n  - name: P\n"
	for _, tc := range []struct {
		name, yaml string
		problem    where // zero: the file loads
		msg        string
		warning    where // zero: no warning expected
		warnMsg    string
		line       int // of the warning, when set
	}{
		{name: "deny list as documented",
			yaml: "    kind: plugins.deny_filter.deny.DenyListPlugin\n    hooks: [prompt_pre_fetch]\n    config:\n      words: [innovative]\n"},
		{name: "unknown config key",
			yaml:    "    kind: plugins.deny_filter.deny.DenyListPlugin\n    hooks: [prompt_pre_fetch]\n    config:\n      words: [a]\n      wordz: [b]\n",
			warning: where{"P", "config.wordz"}, warnMsg: "unknown key", line: 5},
		{name: "bad config",
			yaml:    "    kind: plugins.deny_filter.deny.DenyListPlugin\n    hooks: [prompt_pre_fetch]\n    config: {words: innovative}\n",
			problem: where{"P", "config.words"}, msg: "must be a list"},
		{name: "no hooks",
			yaml:    "    kind: plugins.deny_filter.deny.DenyListPlugin\n    config: {words: [a]}\n",
			warning: where{"P", "hooks"}, warnMsg: "never runs"},
		{name: "hook not implemented",
			yaml:    "    kind: plugins.deny_filter.deny.DenyListPlugin\n    hooks: [prompt_pre_fetch, tool_post_invoke]\n    config: {words: [a]}\n",
			warning: where{"P", "hooks[1]"}, warnMsg: "does not implement tool_post_invoke"},
		{name: "built in with a transport",
			yaml:    "    kind: plugins.deny_filter.deny.DenyListPlugin\n    hooks: [prompt_pre_fetch]\n    config: {words: [a]}\n    mcp: {proto: STREAMABLEHTTP, url: 'http://p/mcp'}\n",
			warning: where{"P", "kind"}, warnMsg: "transport section is ignored"},
		{name: "class path behind a transport",
			yaml:    "    kind: plugins.summarizer.summarizer.SummarizerPlugin\n    hooks: [tool_post_invoke]\n    mcp: {proto: STREAMABLEHTTP, url: 'http://p/mcp'}\n",
			warning: where{"P", "kind"}, warnMsg: "called as an external plugin"},
		{name: "class path without a transport",
			yaml:    "    kind: plugins.summarizer.summarizer.SummarizerPlugin\n    hooks: [tool_post_invoke]\n",
			problem: where{"P", "kind"}, msg: "cannot run in the sidecar: it is not a built-in plugin (deny_filter"},
		{name: "no kind",
			yaml:    "    hooks: [tool_post_invoke]\n",
			problem: where{"P", "kind"}, msg: "required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(head+tc.yaml), nil)
			if tc.problem != (where{}) {
				var ve *ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("want a ValidationError, got %v", err)
				}
				if msg, ok := wheres(ve.Problems)[tc.problem]; !ok || !strings.Contains(msg, tc.msg) {
					t.Errorf("problems %v; want %v: ...%s...", ve.Problems, tc.problem, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("want valid: %v", err)
			}
			if tc.warning == (where{}) {
				if len(c.Warnings) > 0 {
					t.Errorf("warnings %v, want none", c.Warnings)
				}
				return
			}
			for _, w := range c.Warnings {
				if (where{w.Plugin, w.Field}) == tc.warning && strings.Contains(w.Message, tc.warnMsg) {
					if tc.line != 0 && w.Line != tc.line {
						t.Errorf("warning %v at line %d, want %d", w, w.Line, tc.line)
					}
					return
				}
			}
			t.Errorf("warnings %v; want %v: ...%s...", c.Warnings, tc.warning, tc.warnMsg)
		})
	}
}

// TestIsolatedVenv: cpex 0.1.4's installer output is a problem that says
// what to write instead, never a crash: the built-in class path when
// config.class_name is one, else an external plugin server.
func TestIsolatedVenv(t *testing.T) {
	const head = "plugins:\n  - name: P\n    kind: isolated_venv\n    hooks: [prompt_pre_fetch]\n"
	for _, tc := range []struct {
		name, yaml string
		field      string
		want       []string
		notWant    string
	}{
		{"built-in class", "    config: {class_name: plugins.deny_filter.deny.DenyListPlugin, words: [a]}\n",
			"kind", []string{"kind: plugins.deny_filter.deny.DenyListPlugin", "sidecar's process"}, "kind: external"},
		{"built-in class, cpex-plugins path", "    config: {class_name: ' cpex_pii_filter.pii_filter.PIIFilterPlugin '}\n",
			"kind", []string{"kind: cpex_pii_filter.pii_filter.PIIFilterPlugin"}, "kind: external"},
		{"other class", "    config: {class_name: plugins.summarizer.summarizer.SummarizerPlugin}\n",
			"kind", []string{"plugins.summarizer.summarizer.SummarizerPlugin is not a built-in plugin", "kind: external", "proto: STDIO", "STREAMABLEHTTP"}, "sidecar's process"},
		{"no class_name", "    config: {python: /venv/bin/python}\n",
			"config.class_name", []string{"required with kind isolated_venv", "kind: external"}, ""},
		{"class_name not a string", "    config: {class_name: 7}\n",
			"config.class_name", []string{"required"}, ""},
		{"no config", "",
			"config.class_name", []string{"required"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(head+tc.yaml), nil)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want a ValidationError, got %v", err)
			}
			msg, ok := wheres(ve.Problems)[where{"P", tc.field}]
			if !ok {
				t.Fatalf("problems %v; want one at %s", ve.Problems, tc.field)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("problem %q lacks %q", msg, w)
				}
			}
			if tc.notWant != "" && strings.Contains(msg, tc.notWant) {
				t.Errorf("problem %q says %q", msg, tc.notWant)
			}
			if len(ve.Problems) != 1 {
				t.Errorf("problems %v, want exactly one", ve.Problems)
			}
		})
	}
}
