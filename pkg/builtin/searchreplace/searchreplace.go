// Package searchreplace is the built-in search and replace: ContextForge's
// plugins.regex_filter.search_replace.SearchReplacePlugin. Each rule's
// regular expression (RE2 syntax) is replaced in every string of the
// arguments and results, rules applied in order, each on the previous
// one's output.
package searchreplace

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/jsonscan"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/plugin"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Spec describes the plugin.
func Spec() plugin.Spec {
	return plugin.Spec{
		Name:  "search_replace",
		Kinds: []string{"plugins.regex_filter.search_replace.SearchReplacePlugin"},
		Hooks: []cpex.HookType{cpex.PromptPreFetch, cpex.PromptPostFetch, cpex.ToolPreInvoke, cpex.ToolPostInvoke},
		Keys:  keys,
		New:   New,
	}
}

var keys = []plugin.Key{
	{Name: "words", Supported: true, Note: "rules `{search, replace}`: a regular expression (RE2) and its replacement, with Python group references (`\\1`, `\\g<name>`), applied in order"},
}

type rule struct {
	Search  *string `json:"search"`
	Replace *string `json:"replace"`
}

type config struct {
	Words []rule `json:"words"`
}

type compiled struct {
	re   *regexp.Regexp
	repl string // in Go's template syntax
}

// Plugin is a configured search and replace.
type Plugin struct {
	rules []compiled
	decs  jsonscan.Decoders
}

// New builds the plugin from its config: block.
func New(cfg map[string]any) (plugin.Plugin, []plugin.Issue, error) {
	var c config
	issues := plugin.Decode(cfg, &c, keys)
	if _, set := cfg["words"]; !set {
		issues = append(issues, plugin.Problem("words", "required: a list of {search, replace}"))
	}
	p := &Plugin{}
	for i, w := range c.Words {
		f := fmt.Sprintf("words[%d]", i)
		if w.Search == nil || w.Replace == nil {
			issues = append(issues, plugin.Problem(f, "search and replace are both required"))
			continue
		}
		re, err := regexp.Compile(*w.Search)
		if err != nil {
			// ContextForge skips a pattern Python cannot compile; one RE2
			// cannot compile is refused rather than silently skipped.
			issues = append(issues, plugin.Problem(f+".search", fmt.Sprintf("not an RE2 regular expression: %v", err)))
			continue
		}
		p.rules = append(p.rules, compiled{re: re, repl: goTemplate(*w.Replace)})
	}
	if err := plugin.Err(issues); err != nil {
		return nil, issues, err
	}
	return p, issues, nil
}

// goTemplate turns a Python re.sub replacement (\1, \g<1>, \g<name>, \\)
// into Go's Regexp.Expand template ($ escaped as $$).
func goTemplate(py string) string {
	var b strings.Builder
	for i := 0; i < len(py); i++ {
		c := py[i]
		switch {
		case c == '$':
			b.WriteString("$$")
		case c == '\\' && i+1 < len(py):
			n := py[i+1]
			switch {
			case n >= '0' && n <= '9':
				j := i + 1
				for j < len(py) && j < i+3 && py[j] >= '0' && py[j] <= '9' {
					j++
				}
				b.WriteString("${" + py[i+1:j] + "}")
				i = j - 1
			case n == 'g' && i+2 < len(py) && py[i+2] == '<':
				if end := strings.IndexByte(py[i+3:], '>'); end >= 0 {
					b.WriteString("${" + py[i+3:i+3+end] + "}")
					i += 3 + end
					continue
				}
				b.WriteByte(c)
			case n == '\\':
				b.WriteByte('\\')
				i++
			case n == 'n':
				b.WriteByte('\n')
				i++
			case n == 't':
				b.WriteByte('\t')
				i++
			default:
				b.WriteByte(c)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Invoke implements plugin.Plugin.
func (p *Plugin) Invoke(_ context.Context, hook cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.PluginResult, error) {
	var member string
	var only func(path []string) bool
	switch hook {
	case cpex.PromptPreFetch, cpex.ToolPreInvoke:
		member = "args"
	case cpex.ToolPostInvoke:
		member = "result"
	case cpex.PromptPostFetch:
		// ContextForge rewrites the text of each message only.
		member = "result"
		only = func(path []string) bool {
			return len(path) == 3 && path[0] == "messages" && path[1] == "content" && path[2] == "text"
		}
	default:
		return nil, nil
	}
	out, changed, err := jsonscan.Walker{Paths: only != nil, Decoders: &p.decs}.Rewrite(payload, member, func(path []string, s string) (string, bool) {
		if only != nil && !only(path) {
			return "", false
		}
		r := s
		for _, c := range p.rules {
			r = c.re.ReplaceAllString(r, c.repl)
		}
		return r, r != s
	})
	if err != nil {
		return nil, fmt.Errorf("search_replace: %w", err)
	}
	if !changed {
		return nil, nil
	}
	return plugin.Modified(out), nil
}

// Close implements plugin.Plugin.
func (p *Plugin) Close() error { return nil }

// NonBlocking implements plugin.NonBlocking: Invoke only computes.
func (p *Plugin) NonBlocking() bool { return true }
