// Package secrets is the built-in secrets detection: cpex-plugins'
// secrets_detection (cpex_secrets_detection.SecretsDetectionPlugin,
// formerly ContextForge's
// plugins.secrets_detection.secrets_detection.SecretsDetectionPlugin).
// Likely credentials (cloud and SaaS keys, tokens, private key blocks, and
// opt-in broad shapes) in prompt arguments, tool arguments, tool results
// and resource text block the message or are redacted.
//
// Each detector runs only on strings that hold its literal marker (AKIA,
// xox, -----BEGIN, ...) or, for the broad shapes, a long enough run of its
// alphabet, and the markers of all of them are looked for in one pass over
// the payload first, so a clean payload costs that one pass.
package secrets

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unsafe"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/jsonscan"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/plugin"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Spec describes the plugin.
func Spec() plugin.Spec {
	return plugin.Spec{
		Name: "secrets_detection",
		Kinds: []string{
			"plugins.secrets_detection.secrets_detection.SecretsDetectionPlugin",
			"cpex_secrets_detection.SecretsDetectionPlugin",
			"cpex_secrets_detection.secrets_detection.SecretsDetectionPlugin",
		},
		Hooks: []cpex.HookType{cpex.PromptPreFetch, cpex.ToolPreInvoke, cpex.ToolPostInvoke, cpex.ResourcePostFetch},
		Keys:  keys,
		New:   New,
	}
}

var keys = []plugin.Key{
	{Name: "enabled", Supported: true, Note: "detector name → on/off; unspecified detectors keep their defaults"},
	{Name: "redact", Supported: true, Note: "replace the secrets in the forwarded payload (default false)"},
	{Name: "redaction_text", Supported: true, Note: `the replacement (default "***REDACTED***")`},
	{Name: "block_on_detection", Supported: true, Note: "refuse the message with code SECRETS_DETECTED (default true)"},
	{Name: "min_findings_to_block", Supported: true, Note: "findings needed to block (default 1)"},
	{Name: "field_allowlist", Supported: true, Note: "dotted paths scanned (empty: all); lists are transparent"},
	{Name: "field_denylist", Supported: true, Note: "dotted paths not scanned; wins over the allowlist"},
}

// detector is one secret pattern. When capture is set, only its first
// group is the secret (and redacted).
type detector struct {
	name    string
	on      bool // default
	re      *regexp.Regexp
	capture bool
	// gate says which strings can hold a match at all.
	gate gate
}

// gate is what a match needs in its text: one of the literal markers
// (lits as they are, folds ignoring case, given in lower case), or a run
// of at least run bytes of the alphabet in.
type gate struct {
	lits, folds []string
	run         int
	in          func(byte) bool
}

func literal(subs ...string) gate     { return gate{lits: subs} }
func foldLiteral(subs ...string) gate { return gate{folds: subs} }
func runOf(n int, in func(byte) bool) gate {
	return gate{run: n, in: in}
}

// open reports whether s can hold a match.
func (g *gate) open(s string) bool {
	for _, sub := range g.lits {
		if strings.Contains(s, sub) {
			return true
		}
	}
	for _, sub := range g.folds {
		if containsFold(s, sub) {
			return true
		}
	}
	return g.run > 0 && hasRun(s, g.run, g.in)
}

// containsFold reports whether s holds the lower-case ASCII sub, ignoring
// the case of s.
func containsFold(s, sub string) bool {
	up := sub[0] - 'a' + 'A'
	for i := 0; i+len(sub) <= len(s); i++ {
		c := s[i]
		if (c == sub[0] || c == up) && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// hasRun reports whether s has a run of at least n bytes of the alphabet
// in.
func hasRun(s string, n int, in func(byte) bool) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		if in(s[i]) {
			if run++; run >= n {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// gates is the gates of all the enabled detectors as one: whether any
// detector can match in a text, in one pass over it for the markers
// however many there are (a substring search per marker cost more than
// the plugin's other work on a small payload).
type gates struct {
	first   [256]bool     // a marker starts with the byte
	byFirst [256][]marker // the markers by their first byte (both cases when folded)
	runs    []gate        // the detectors gated by a run
}

type marker struct {
	text string
	fold bool
}

func newGates(dets []detector) *gates {
	gs := &gates{}
	for _, d := range dets {
		for _, l := range d.gate.lits {
			gs.byFirst[l[0]] = append(gs.byFirst[l[0]], marker{text: l})
		}
		for _, f := range d.gate.folds {
			gs.byFirst[f[0]] = append(gs.byFirst[f[0]], marker{text: f, fold: true})
			if up := f[0] - 'a' + 'A'; 'A' <= up && up <= 'Z' {
				gs.byFirst[up] = append(gs.byFirst[up], marker{text: f, fold: true})
			}
		}
		if d.gate.run > 0 {
			gs.runs = append(gs.runs, d.gate)
		}
	}
	for b, ms := range gs.byFirst {
		gs.first[b] = len(ms) > 0
	}
	return gs
}

// open reports whether any detector can match in s.
func (gs *gates) open(s string) bool {
	for i := 0; i < len(s); i++ {
		if !gs.first[s[i]] {
			continue
		}
		for _, m := range gs.byFirst[s[i]] {
			if n := len(m.text); i+n <= len(s) && (s[i:i+n] == m.text || m.fold && strings.EqualFold(s[i:i+n], m.text)) {
				return true
			}
		}
	}
	for i := range gs.runs {
		if gs.runs[i].open(s) {
			return true
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isBase64(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '+' || c == '/'
}

// detectors returns the detector set of cpex-plugins' secrets_detection,
// in RE2.
func detectors() []detector {
	return []detector{
		{"aws_access_key_id", true, regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`), false, literal("AKIA")},
		{"aws_secret_access_key", true, regexp.MustCompile(`(?i)aws.{0,20}(?:secret|access).{0,20}[:=]\s*["']?([A-Za-z0-9/+=]{40})["']?`), true, foldLiteral("aws")},
		{"google_api_key", true, regexp.MustCompile(`\bAIza[0-9A-Za-z\-_]{35}\b`), false, literal("AIza")},
		{"github_token", true, regexp.MustCompile(`\b(?:gh[opusr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{20,})\b`), false, literal("gho_", "ghp_", "ghu_", "ghs_", "ghr_", "github_pat_")},
		{"stripe_secret_key", true, regexp.MustCompile(`\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b`), false, literal("_live_", "_test_")},
		{"generic_api_key_assignment", false, regexp.MustCompile(`(?i)\b(?:(?:x[-_])?api[-_]?key|apikey|api[_-]?token|access[_-]?token|bearer[_-]?token|auth[_-]?token)\b\s*[:=]\s*['"]?([A-Za-z0-9_\-]{20,})['"]?`), true,
			foldLiteral("api", "access", "bearer", "auth")},
		{"slack_token", true, regexp.MustCompile(`\bxox[abpqr]-[0-9A-Za-z\-]{10,80}\b`), false, literal("xox")},
		{"private_key_block", true, regexp.MustCompile(`-----BEGIN (?:RSA|DSA|EC|OPENSSH) PRIVATE KEY-----`), false, literal("-----BEGIN ")},
		{"jwt_like", false, regexp.MustCompile(`\beyJ[a-zA-Z0-9_\-]{10,}\.eyJ[a-zA-Z0-9_\-]{10,}\.[a-zA-Z0-9_\-]{10,}\b`), false, literal("eyJ")},
		{"hex_secret_32", false, regexp.MustCompile(`(?i)\b[a-f0-9]{32,}\b`), false, runOf(32, isHex)},
		{"base64_24", false, regexp.MustCompile(`(?:^|[^A-Za-z0-9+/])((?:[A-Za-z0-9+/]{24,}={0,2}|[A-Za-z0-9+/]{22}==|[A-Za-z0-9+/]{23}=))`), true, runOf(22, isBase64)},
	}
}

type config struct {
	Enabled            map[string]bool `json:"enabled"`
	Redact             bool            `json:"redact"`
	RedactionText      *string         `json:"redaction_text"`
	BlockOnDetection   *bool           `json:"block_on_detection"`
	MinFindingsToBlock *int            `json:"min_findings_to_block"`
	FieldAllowlist     []string        `json:"field_allowlist"`
	FieldDenylist      []string        `json:"field_denylist"`
}

// Plugin is a configured secrets detector.
type Plugin struct {
	dets      []detector // enabled only
	redact    bool
	text      string
	block     bool
	min       int
	allow     [][]string
	deny      [][]string
	hasFields bool
	gates     *gates // of dets
	decs      jsonscan.Decoders
}

// New builds the detector from its config: block.
func New(cfg map[string]any) (plugin.Plugin, []plugin.Issue, error) {
	var c config
	issues := plugin.Decode(cfg, &c, keys)
	p := &Plugin{redact: c.Redact, text: "***REDACTED***", block: true, min: 1}
	if c.RedactionText != nil {
		p.text = *c.RedactionText
	}
	if c.BlockOnDetection != nil {
		p.block = *c.BlockOnDetection
	}
	if c.MinFindingsToBlock != nil {
		if *c.MinFindingsToBlock < 1 {
			issues = append(issues, plugin.Problem("min_findings_to_block", "must be at least 1"))
		}
		p.min = *c.MinFindingsToBlock
	}
	all := detectors()
	names := make([]string, len(all))
	for i, d := range all {
		names[i] = d.name
	}
	enabled := make([]string, 0, len(c.Enabled))
	for name := range c.Enabled {
		enabled = append(enabled, name)
	}
	sort.Strings(enabled)
	for _, name := range enabled {
		if !slices.Contains(names, name) {
			issues = append(issues, plugin.Warning("enabled."+name, "unknown detector: ignored (known: "+strings.Join(names, ", ")+")"))
		}
	}
	for _, d := range all {
		if on, set := c.Enabled[d.name]; set {
			d.on = on
		}
		if d.on {
			p.dets = append(p.dets, d)
		}
	}
	p.allow = paths("field_allowlist", c.FieldAllowlist, &issues)
	p.deny = paths("field_denylist", c.FieldDenylist, &issues)
	p.hasFields = len(p.allow) > 0 || len(p.deny) > 0
	p.gates = newGates(p.dets)
	if err := plugin.Err(issues); err != nil {
		return nil, issues, err
	}
	return p, issues, nil
}

// paths parses dotted field paths, as cpex-plugins validates them.
func paths(key string, in []string, issues *[]plugin.Issue) [][]string {
	var out [][]string
	for i, s := range in {
		f := fmt.Sprintf("%s[%d]", key, i)
		segs := strings.Split(s, ".")
		bad := strings.TrimSpace(s) == ""
		for _, seg := range segs {
			bad = bad || strings.TrimSpace(seg) == ""
		}
		if bad {
			*issues = append(*issues, plugin.Problem(f, fmt.Sprintf("%q: want non-empty dot-separated segments", s)))
			continue
		}
		out = append(out, segs)
	}
	return out
}

// prefixOf reports whether p is a prefix of (or equal to) path.
func prefixOf(p, path []string) bool {
	return len(p) <= len(path) && slices.Equal(p, path[:len(p)])
}

// eligible reports whether the string at path is scanned: not under a
// denied path, and under an allowed one when there is an allowlist.
func (p *Plugin) eligible(path []string) bool {
	for _, d := range p.deny {
		if prefixOf(d, path) {
			return false
		}
	}
	if len(p.allow) == 0 {
		return true
	}
	for _, a := range p.allow {
		if prefixOf(a, path) {
			return true
		}
	}
	return false
}

// stage is what one hook scans.
type stage struct {
	member      string
	textOnly    bool // resource content: the text fields, without field filters
	description string
}

var stages = map[cpex.HookType]stage{
	cpex.PromptPreFetch:    {"args", false, "Potential secrets detected in prompt arguments"},
	cpex.ToolPreInvoke:     {"args", false, "Potential secrets detected in tool arguments"},
	cpex.ToolPostInvoke:    {"result", false, "Potential secrets detected in tool result"},
	cpex.ResourcePostFetch: {"content", true, "Potential secrets detected in resource content"},
}

// Invoke implements plugin.Plugin.
func (p *Plugin) Invoke(_ context.Context, hook cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.PluginResult, error) {
	if len(p.dets) == 0 || !p.mayHold(payload) { // most calls: first, before even the stage's lookup
		return nil, nil
	}
	st, ok := stages[hook]
	if !ok {
		return nil, nil
	}
	var found []string // detector names, one per finding
	w := jsonscan.Walker{Paths: st.textOnly || p.hasFields, Decoders: &p.decs}
	out, changed, err := w.Rewrite(payload, st.member, func(path []string, s string) (string, bool) {
		if st.textOnly {
			if len(path) == 0 || path[len(path)-1] != "text" {
				return "", false
			}
		} else if p.hasFields && !p.eligible(path) {
			return "", false
		}
		return p.scan(s, &found)
	})
	if err != nil {
		return nil, fmt.Errorf("secrets_detection: %w", err)
	}
	if len(found) == 0 {
		return nil, nil
	}
	if p.block && len(found) >= p.min {
		examples := make([]any, len(found))
		for i, t := range found {
			examples[i] = map[string]any{"type": t}
		}
		return plugin.Block(&cpex.PluginViolation{
			Reason: "Secrets detected", Description: st.description, Code: "SECRETS_DETECTED",
			Details: map[string]any{"count": len(found), "examples": examples},
		}), nil
	}
	if p.redact && changed {
		return plugin.Modified(out), nil
	}
	return nil, nil
}

// mayHold reports whether payload can hold a secret: false only when it
// has no escapes (so every string appears verbatim in it) and no detector's
// marker or alphabet run is in it at all.
func (p *Plugin) mayHold(payload []byte) bool {
	if bytes.IndexByte(payload, '\\') >= 0 {
		return true
	}
	// The gates only read, and keep nothing: the payload is looked at in
	// place rather than copied (a copy of every payload, per call).
	return p.gates.open(unsafe.String(unsafe.SliceData(payload), len(payload)))
}

// scan records the findings in s and returns it redacted when redact is
// set.
func (p *Plugin) scan(s string, found *[]string) (string, bool) {
	type span struct{ start, end int }
	var spans []span
	for i := range p.dets {
		d := &p.dets[i]
		if !d.gate.open(s) {
			continue
		}
		for _, m := range d.re.FindAllStringSubmatchIndex(s, -1) {
			start, end := m[0], m[1]
			if d.capture && len(m) >= 4 && m[2] >= 0 {
				start, end = m[2], m[3]
			}
			*found = append(*found, d.name)
			spans = append(spans, span{start, end})
		}
	}
	if !p.redact || len(spans) == 0 {
		return "", false
	}
	sort.Slice(spans, func(a, b int) bool { return spans[a].start < spans[b].start })
	var b strings.Builder
	at := 0
	for _, sp := range spans {
		if sp.start < at { // overlaps the span redacted last
			at = max(at, sp.end)
			continue
		}
		b.WriteString(s[at:sp.start])
		b.WriteString(p.text)
		at = sp.end
	}
	b.WriteString(s[at:])
	return b.String(), true
}

// Close implements plugin.Plugin.
func (p *Plugin) Close() error { return nil }

// NonBlocking implements plugin.NonBlocking: Invoke only computes.
func (p *Plugin) NonBlocking() bool { return true }
