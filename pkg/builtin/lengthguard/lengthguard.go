// Package lengthguard is the built-in output length guard: ContextForge's
// plugins.output_length_guard.output_length_guard.OutputLengthGuardPlugin.
// The text of a tool result (its content text items, embedded resource
// text and structuredContent strings) is held between a minimum and a
// maximum length, in characters or estimated tokens: over-long text is
// truncated (optionally at a word boundary, with an ellipsis) or the
// result is blocked.
package lengthguard

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/jsonscan"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/plugin"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Spec describes the plugin.
func Spec() plugin.Spec {
	return plugin.Spec{
		Name:  "output_length_guard",
		Kinds: []string{"plugins.output_length_guard.output_length_guard.OutputLengthGuardPlugin"},
		Hooks: []cpex.HookType{cpex.ToolPostInvoke},
		Keys:  keys,
		New:   New,
	}
}

var keys = []plugin.Key{
	{Name: "min_chars", Supported: true, Note: "minimum characters, 0 disables (character mode)"},
	{Name: "max_chars", Supported: true, Note: "maximum characters, 0 or null disables (character mode)"},
	{Name: "min_tokens", Supported: true, Note: "minimum estimated tokens, 0 disables (token mode)"},
	{Name: "max_tokens", Supported: true, Note: "maximum estimated tokens, 0 or null disables (token mode)"},
	{Name: "chars_per_token", Supported: true, Note: "characters per token, 1 to 10 (default 4)"},
	{Name: "limit_mode", Supported: true, Note: "character (default) or token"},
	{Name: "strategy", Supported: true, Note: "truncate (default) or block"},
	{Name: "ellipsis", Supported: true, Note: `appended when truncating (default "…")`},
	{Name: "word_boundary", Supported: true, Note: "truncate after the last boundary character within 20% of the limit"},
	{Name: "max_text_length", Supported: true, Note: "the longest text considered when truncating by tokens (1000 to 10000000, default 1000000)"},
	{Name: "max_structure_size", Supported: true, Note: "a larger list or object fails the hook (10 to 100000, default 10000)"},
	{Name: "max_recursion_depth", Supported: true, Note: "deeper values fail the hook (10 to 1000, default 100)"},
}

type config struct {
	MinChars          int     `json:"min_chars"`
	MaxChars          *int    `json:"max_chars"`
	MinTokens         int     `json:"min_tokens"`
	MaxTokens         *int    `json:"max_tokens"`
	CharsPerToken     *int    `json:"chars_per_token"`
	LimitMode         string  `json:"limit_mode"`
	Strategy          string  `json:"strategy"`
	Ellipsis          *string `json:"ellipsis"`
	WordBoundary      bool    `json:"word_boundary"`
	MaxTextLength     *int    `json:"max_text_length"`
	MaxStructureSize  *int    `json:"max_structure_size"`
	MaxRecursionDepth *int    `json:"max_recursion_depth"`
}

// Plugin is a configured length guard.
type Plugin struct {
	minChars, maxChars   int // 0: none
	minTokens, maxTokens int // 0: none
	perToken             int
	tokens               bool // limit_mode token
	block                bool
	ellipsis             string
	wordBoundary         bool
	maxText              int
	walker               jsonscan.Walker
	decs                 jsonscan.Decoders
}

// New builds the guard from its config: block.
func New(cfg map[string]any) (plugin.Plugin, []plugin.Issue, error) {
	var c config
	issues := plugin.Decode(cfg, &c, keys)
	p := &Plugin{perToken: 4, ellipsis: "\u2026", wordBoundary: c.WordBoundary, maxText: 1_000_000,
		walker: jsonscan.Walker{Paths: true, MaxItems: 10_000, MaxDepth: 100}}
	nonNeg := func(key string, v int) int {
		if v < 0 {
			issues = append(issues, plugin.Problem(key, "must be 0 (disabled) or more"))
		}
		return v
	}
	p.minChars, p.minTokens = nonNeg("min_chars", c.MinChars), nonNeg("min_tokens", c.MinTokens)
	if c.MaxChars != nil {
		p.maxChars = nonNeg("max_chars", *c.MaxChars)
	}
	if c.MaxTokens != nil {
		p.maxTokens = nonNeg("max_tokens", *c.MaxTokens)
	}
	inRange := func(key string, v *int, def, lo, hi int) int {
		if v == nil {
			return def
		}
		if *v < lo || *v > hi {
			issues = append(issues, plugin.Problem(key, fmt.Sprintf("must be between %d and %d", lo, hi)))
			return def
		}
		return *v
	}
	p.perToken = inRange("chars_per_token", c.CharsPerToken, 4, 1, 10)
	p.maxText = inRange("max_text_length", c.MaxTextLength, 1_000_000, 1000, 10_000_000)
	p.walker.MaxItems = inRange("max_structure_size", c.MaxStructureSize, 10_000, 10, 100_000)
	p.walker.MaxDepth = inRange("max_recursion_depth", c.MaxRecursionDepth, 100, 10, 1000)
	switch strings.ToLower(strings.TrimSpace(c.LimitMode)) {
	case "", "character":
	case "token":
		p.tokens = true
	default:
		issues = append(issues, plugin.Problem("limit_mode", fmt.Sprintf("%q: want character or token", c.LimitMode)))
	}
	switch strings.ToLower(strings.TrimSpace(c.Strategy)) {
	case "", "truncate":
	case "block":
		p.block = true
	default:
		issues = append(issues, plugin.Problem("strategy", fmt.Sprintf("%q: want truncate or block", c.Strategy)))
	}
	if c.Ellipsis != nil {
		p.ellipsis = *c.Ellipsis
	}
	if p.tokens && (c.MinChars > 0 || c.MaxChars != nil && *c.MaxChars > 0) {
		issues = append(issues, plugin.Warning("limit_mode", "token: min_chars and max_chars are not enforced"))
	}
	if !p.tokens && (c.MinTokens > 0 || c.MaxTokens != nil && *c.MaxTokens > 0) {
		issues = append(issues, plugin.Warning("limit_mode", "character: min_tokens and max_tokens are not enforced"))
	}
	if err := plugin.Err(issues); err != nil {
		return nil, issues, err
	}
	p.walker.Decoders = &p.decs
	return p, issues, nil
}

// guarded reports whether the string at path (under the tool result) is
// text the guard holds: a content item's text, an embedded resource's
// text, a {text} result's text, or any string of structuredContent.
func guarded(path []string) bool {
	switch {
	case len(path) == 0:
		return true
	case path[0] == "structuredContent" || path[0] == "structured_content":
		return true
	}
	return slices3(path, "text") || slices3(path, "content", "text") || slices3(path, "content", "resource", "text")
}

func slices3(path []string, want ...string) bool {
	if len(path) != len(want) {
		return false
	}
	for i := range want {
		if path[i] != want[i] {
			return false
		}
	}
	return true
}

// numeric reports whether text is a finite number (exempt from the
// guard), as ContextForge checks it.
func numeric(text string) bool {
	if len(text) > 50 {
		return false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	return err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
}

// Invoke implements plugin.Plugin.
func (p *Plugin) Invoke(_ context.Context, hook cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.PluginResult, error) {
	if hook != cpex.ToolPostInvoke {
		return nil, nil
	}
	var violation *cpex.PluginViolation
	out, changed, err := p.walker.Rewrite(payload, "result", func(path []string, s string) (string, bool) {
		if violation != nil || !guarded(path) || numeric(s) {
			return "", false
		}
		n := utf8.RuneCountInString(s)
		tokens := n / p.perToken
		var below, above bool
		if p.tokens {
			below, above = p.minTokens > 0 && tokens < p.minTokens, p.maxTokens > 0 && tokens > p.maxTokens
		} else {
			below, above = p.minChars > 0 && n < p.minChars, p.maxChars > 0 && n > p.maxChars
		}
		switch {
		case !below && !above:
			return "", false
		case p.block:
			violation = p.violation(n, tokens, above)
			return "", false
		case above:
			return p.truncate(s), true
		}
		return "", false // under the minimum: truncation lets it through
	})
	if err != nil {
		return nil, fmt.Errorf("output_length_guard: %w", err)
	}
	if violation != nil {
		return plugin.Block(violation), nil
	}
	if changed {
		return plugin.Modified(out), nil
	}
	return nil, nil
}

func (p *Plugin) violation(n, tokens int, above bool) *cpex.PluginViolation {
	mcp, status := -32000, 422
	v := &cpex.PluginViolation{MCPErrorCode: &mcp, HTTPStatusCode: &status, Code: "OUTPUT_LENGTH_VIOLATION"}
	strategy := "block"
	switch {
	case above && p.tokens:
		v.Reason, v.Code = "Output estimated token count out of bounds", "OUTPUT_TOKEN_VIOLATION"
		v.Description = fmt.Sprintf("Estimated token count %d exceeds max_tokens %d", tokens, p.maxTokens)
		v.Details = map[string]any{"token_count": tokens, "max_tokens": p.maxTokens, "chars_per_token": p.perToken, "strategy": strategy}
	case above:
		v.Reason = "Output length out of bounds"
		v.Description = fmt.Sprintf("Result length %d exceeds max_chars %d", n, p.maxChars)
		v.Details = map[string]any{"length": n, "max_chars": p.maxChars, "strategy": strategy}
	default:
		v.Reason = "Output length below minimum"
		v.Description = fmt.Sprintf("Result length %d (tokens %d) below minimum", n, tokens)
		v.Details = map[string]any{"length": n, "min_chars": p.minChars, "token_count": tokens, "min_tokens": p.minTokens, "strategy": strategy}
	}
	return v
}

// boundary holds the characters a word-boundary cut may follow.
const boundary = " \t\n\r.,;:!?-\u2014\u2013/\\()[]{}"

// truncate cuts an over-long text as ContextForge does: by tokens, at
// max_tokens × chars_per_token characters; by characters, so that the
// text and the ellipsis fit max_chars. With word_boundary the cut moves
// back to just after the last boundary character within 20% of the limit.
func (p *Plugin) truncate(s string) string {
	r := []rune(s)
	ell := []rune(p.ellipsis)
	if p.tokens {
		if len(r) > p.maxText {
			r = r[:p.maxText]
		}
		cut := min(len(r), p.maxTokens*p.perToken)
		if p.wordBoundary && cut > 0 {
			cut = wordCut(r, cut, cut)
		}
		return string(r[:cut]) + p.ellipsis
	}
	if len(ell) >= p.maxChars {
		return string(r[:p.maxChars])
	}
	cut := p.maxChars - len(ell)
	if p.wordBoundary && cut > 0 {
		cut = wordCut(r, cut, p.maxChars)
	}
	return string(r[:cut]) + p.ellipsis
}

func wordCut(r []rune, cut, limit int) int {
	cut = min(cut, len(r))
	low := max(0, cut-int(float64(limit)*0.2))
	for i := cut - 1; i >= low; i-- {
		if strings.ContainsRune(boundary, r[i]) {
			return i + 1
		}
	}
	return cut
}

// Close implements plugin.Plugin.
func (p *Plugin) Close() error { return nil }

// NonBlocking implements plugin.NonBlocking: Invoke only computes.
func (p *Plugin) NonBlocking() bool { return true }
