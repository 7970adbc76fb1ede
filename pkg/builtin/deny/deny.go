// Package deny is the built-in deny list: ContextForge's
// plugins.deny_filter.deny.DenyListPlugin. A prompt (or tool call) whose
// arguments contain a listed word, compared ignoring case, anywhere in a
// string at any depth, is refused with code "deny".
package deny

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/jsonscan"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/plugin"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Spec describes the plugin.
func Spec() plugin.Spec {
	return plugin.Spec{
		Name:  "deny_filter",
		Kinds: []string{"plugins.deny_filter.deny.DenyListPlugin"},
		// ContextForge documents prompt_pre_fetch; tool_pre_invoke carries
		// arguments of the same kind and is scanned the same way.
		Hooks: []cpex.HookType{cpex.PromptPreFetch, cpex.ToolPreInvoke},
		Keys:  keys,
		New:   New,
	}
}

var keys = []plugin.Key{
	{Name: "words", Supported: true, Note: "the denied words, matched as substrings ignoring case"},
}

type config struct {
	Words []string `json:"words"`
}

// Plugin is a configured deny list.
type Plugin struct {
	words  []string // lower-cased
	bwords [][]byte // the same, for the fast path
	ascii  bool     // every word is ASCII: the fast path applies
	bufs   sync.Pool
	decs   jsonscan.Decoders
}

// New builds the deny list from its config: block.
func New(cfg map[string]any) (plugin.Plugin, []plugin.Issue, error) {
	var c config
	issues := plugin.Decode(cfg, &c, keys)
	if _, set := cfg["words"]; !set {
		issues = append(issues, plugin.Problem("words", "required: the list of denied words"))
	}
	p := &Plugin{ascii: true}
	for i, w := range c.Words {
		if w == "" {
			issues = append(issues, plugin.Problem(fmt.Sprintf("words[%d]", i), "empty: it would deny everything"))
			continue
		}
		lw := strings.ToLower(w)
		p.words, p.bwords = append(p.words, lw), append(p.bwords, []byte(lw))
		p.ascii = p.ascii && isASCII(lw)
	}
	if err := plugin.Err(issues); err != nil {
		return nil, issues, err
	}
	return p, issues, nil
}

// Invoke implements plugin.Plugin.
func (p *Plugin) Invoke(_ context.Context, hook cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.PluginResult, error) {
	if hook != cpex.PromptPreFetch && hook != cpex.ToolPreInvoke {
		return nil, nil
	}
	if p.ascii && !p.mayMatch(payload) {
		return nil, nil
	}
	var found []string
	_, _, err := jsonscan.Walker{Paths: true, Indexes: true, Decoders: &p.decs}.Rewrite(payload, "args", func(path []string, s string) (string, bool) {
		ls := strings.ToLower(s)
		for _, w := range p.words {
			if strings.Contains(ls, w) {
				found = append(found, fmt.Sprintf("%s: contains '%s'", joinPath(path), w))
			}
		}
		return "", false
	})
	if err != nil {
		return nil, fmt.Errorf("deny_filter: %w", err)
	}
	if len(found) == 0 {
		return nil, nil
	}
	return plugin.Block(&cpex.PluginViolation{
		Reason:      "Prompt not allowed",
		Description: "Denied words found in prompt",
		Code:        "deny",
		Details:     map[string]any{"violations": found},
	}), nil
}

// mayMatch reports whether a word can be in payload: false only when the
// payload is ASCII without escapes (so every string appears verbatim in
// it) and no word appears in it, ignoring case.
func (p *Plugin) mayMatch(payload []byte) bool {
	bp, _ := p.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer p.bufs.Put(bp)
	low := (*bp)[:0]
	for _, c := range payload {
		if c == '\\' || c >= utf8.RuneSelf {
			return true
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		low = append(low, c)
	}
	*bp = low
	for _, w := range p.bwords {
		if bytes.Contains(low, w) {
			return true
		}
	}
	return false
}

// Close implements plugin.Plugin.
func (p *Plugin) Close() error { return nil }

// NonBlocking implements plugin.NonBlocking: Invoke only computes.
func (p *Plugin) NonBlocking() bool { return true }

func joinPath(path []string) string {
	var b strings.Builder
	for i, e := range path {
		if i > 0 && !strings.HasPrefix(e, "[") {
			b.WriteByte('.')
		}
		b.WriteString(e)
	}
	return b.String()
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
