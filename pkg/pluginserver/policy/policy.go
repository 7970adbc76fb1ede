// Package policy is the example plugin of cmd/example-plugin: a deny-list
// and a redaction policy, served by [pluginserver].
//
// A deny rule is a regular expression (Go RE2 syntax). A tool call is blocked
// when the pattern matches the tool name or any string in its arguments; a
// prompt when it matches the prompt id or an argument; a resource read when
// it matches the URI. A redaction rule rewrites every match of its pattern
// (regexp.ReplaceAllString, so $1 expands) in the strings of tool arguments
// and prompt arguments (pre hooks) and of tool results, prompt results and
// resource contents (post hooks). Structural fields of results (type,
// mimeType, uri, blob, _meta) are left alone.
package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/rs/zerolog"
	"sigs.k8s.io/yaml"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// DefaultName is the plugin name used when a Config has none.
const DefaultName = "ExamplePolicy"

// DefaultPriority is the priority reported when a Config sets none.
const DefaultPriority = 50

// ViolationCode is the default code of a deny violation.
const ViolationCode = "DENY_LIST"

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("invalid policy configuration")

// Redaction rewrites every match of Pattern with Replacement.
type Redaction struct {
	Pattern     string `json:"pattern"`
	Replacement string `json:"replacement"`
}

// Config is one policy plugin.
type Config struct {
	// Name is the plugin name (default DefaultName).
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	// Deny lists the patterns that block a request.
	Deny []string `json:"deny,omitempty"`
	// Redact lists the rewrites applied to requests and results.
	Redact []Redaction `json:"redact,omitempty"`
	// ViolationCode is the code of a deny violation (default ViolationCode).
	ViolationCode string `json:"violation_code,omitempty"`
	// Hooks, Mode and Priority are what get_plugin_config reports. Default
	// hooks: those the rules can act on; mode sequential; priority 50.
	Hooks    []cpex.HookType `json:"hooks,omitempty"`
	Mode     string          `json:"mode,omitempty"`
	Priority *int            `json:"priority,omitempty"`
}

// File is a policy file: YAML or JSON with a list of plugins, e.g.
//
//	plugins:
//	  - name: DenyList
//	    deny: ["(?i)rm -rf", "^drop_"]
//	  - name: Redactor
//	    mode: transform
//	    redact:
//	      - {pattern: '\d{3}-\d{2}-\d{4}', replacement: "[SSN]"}
type File struct {
	Plugins []Config `json:"plugins"`
}

// ParseFile parses a policy file (YAML or JSON; unknown fields are errors).
func ParseFile(data []byte) ([]Config, error) {
	var f File
	if err := yaml.UnmarshalStrict(data, &f, yaml.DisallowUnknownFields); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if len(f.Plugins) == 0 {
		return nil, fmt.Errorf("%w: no plugins", ErrInvalidConfig)
	}
	return f.Plugins, nil
}

// LoadFile reads and parses the policy file at path.
func LoadFile(path string) ([]Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read policy file: %w", err)
	}
	cfgs, err := ParseFile(data)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	return cfgs, nil
}

// ParseRedaction parses a PATTERN=REPLACEMENT flag value. It splits at the
// first "=" not preceded by a backslash; write "\=" for a literal "=" in the
// pattern (RE2 reads "\=" as "="). The replacement may be empty.
func ParseRedaction(s string) (Redaction, error) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // skip the escaped character
		case '=':
			if i == 0 {
				return Redaction{}, fmt.Errorf("%w: redaction %q has an empty pattern", ErrInvalidConfig, s)
			}
			return Redaction{Pattern: s[:i], Replacement: s[i+1:]}, nil
		}
	}
	return Redaction{}, fmt.Errorf("%w: redaction %q is not PATTERN=REPLACEMENT", ErrInvalidConfig, s)
}

// Plugin is a compiled policy; it implements [pluginserver.Plugin].
type Plugin struct {
	cfg    Config
	deny   []*regexp.Regexp
	redact []compiledRedaction
	log    zerolog.Logger
}

type compiledRedaction struct {
	re   *regexp.Regexp
	repl string
}

// New compiles cfg. log receives one line per decision (nil: none).
func New(cfg Config, log *zerolog.Logger) (*Plugin, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.ViolationCode == "" {
		cfg.ViolationCode = ViolationCode
	}
	p := &Plugin{cfg: cfg, log: zerolog.Nop()}
	if log != nil {
		p.log = log.With().Str("plugin", cfg.Name).Logger()
	}
	for _, pat := range cfg.Deny {
		re, err := regexp.Compile(pat)
		if err != nil {
			return nil, fmt.Errorf("%w: plugin %s: deny pattern: %w", ErrInvalidConfig, cfg.Name, err)
		}
		p.deny = append(p.deny, re)
	}
	for _, r := range cfg.Redact {
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return nil, fmt.Errorf("%w: plugin %s: redact pattern: %w", ErrInvalidConfig, cfg.Name, err)
		}
		p.redact = append(p.redact, compiledRedaction{re, r.Replacement})
	}
	for _, h := range cfg.Hooks {
		if !cpex.KnownHook(h) {
			return nil, fmt.Errorf("%w: plugin %s: unknown hook %q", ErrInvalidConfig, cfg.Name, h)
		}
	}
	return p, nil
}

// NewServer compiles cfgs into one pluginserver.Server with opts (nil:
// defaults). Plugins log through opts.Logger.
func NewServer(cfgs []Config, opts *pluginserver.Options) (*pluginserver.Server, error) {
	var log *zerolog.Logger
	if opts != nil {
		log = opts.Logger
	}
	plugins := make([]pluginserver.Plugin, 0, len(cfgs))
	seen := map[string]bool{}
	for _, c := range cfgs {
		p, err := New(c, log)
		if err != nil {
			return nil, err
		}
		key := strings.ToLower(p.Name())
		if seen[key] {
			return nil, fmt.Errorf("%w: duplicate plugin name %q", ErrInvalidConfig, p.Name())
		}
		seen[key] = true
		plugins = append(plugins, p)
	}
	return pluginserver.NewWithOptions(opts, plugins...), nil
}

// Name implements [pluginserver.Plugin.Name].
func (p *Plugin) Name() string { return p.cfg.Name }

// Hooks returns the hooks the plugin reports: the configured ones, or those
// its rules can act on.
func (p *Plugin) Hooks() []cpex.HookType {
	if len(p.cfg.Hooks) > 0 {
		return slices.Clone(p.cfg.Hooks)
	}
	var hooks []cpex.HookType
	for _, h := range cpex.MCPHooks {
		pre := h == cpex.ToolPreInvoke || h == cpex.PromptPreFetch || h == cpex.ResourcePreFetch
		denies := len(p.deny) > 0 && pre
		redacts := len(p.redact) > 0 && h != cpex.ResourcePreFetch
		if denies || redacts {
			hooks = append(hooks, h)
		}
	}
	return hooks
}

// Config implements [pluginserver.Plugin.Config].
func (p *Plugin) Config() map[string]any {
	prio := DefaultPriority
	if p.cfg.Priority != nil {
		prio = *p.cfg.Priority
	}
	redact := make([]any, 0, len(p.cfg.Redact))
	for _, r := range p.cfg.Redact {
		redact = append(redact, map[string]any{"pattern": r.Pattern, "replacement": r.Replacement})
	}
	deny := make([]any, 0, len(p.cfg.Deny))
	for _, d := range p.cfg.Deny {
		deny = append(deny, d)
	}
	desc := p.cfg.Description
	if desc == "" {
		desc = "Deny-list and redaction policy (mcp-extproc example plugin)"
	}
	return pluginserver.Config{
		Name:        p.cfg.Name,
		Description: desc,
		Author:      "mcp-extproc",
		Version:     "0.1.0",
		Tags:        []string{"example", "policy"},
		Hooks:       p.Hooks(),
		Mode:        p.cfg.Mode,
		Priority:    &prio,
		Config:      map[string]any{"deny": deny, "redact": redact},
	}.Map()
}

// InvokeHook implements [pluginserver.Plugin.InvokeHook]. Hooks the policy
// does not know continue unchanged; a payload that does not parse is an
// error.
func (p *Plugin) InvokeHook(_ context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	obj, err := decodeObject(payload)
	if err != nil {
		return nil, fmt.Errorf("%s payload: %w", hook, err)
	}
	var (
		subject string // what a deny rule checks besides the args
		field   string // the payload field that deny checks and pre hooks redact
		post    bool
	)
	switch hook {
	case cpex.ToolPreInvoke:
		subject, field = "name", "args"
	case cpex.PromptPreFetch:
		subject, field = "prompt_id", "args"
	case cpex.ResourcePreFetch:
		subject = "uri"
	case cpex.ToolPostInvoke, cpex.PromptPostFetch:
		field, post = "result", true
	case cpex.ResourcePostFetch:
		field, post = "content", true
	default:
		return nil, nil
	}

	if !post {
		if v := p.check(obj, subject, field); v != nil {
			p.log.Info().Str("hook", string(hook)).Str("code", v.Code).Any("details", v.Details).Msg("denied")
			return pluginserver.Block(p.cfg.Name, *v), nil
		}
	}
	if field == "" || len(p.redact) == 0 {
		return nil, nil
	}
	val, ok := obj[field]
	if !ok {
		return nil, nil
	}
	newVal, n := p.redactValue(val, post)
	if n == 0 {
		return nil, nil
	}
	obj[field] = newVal
	p.log.Info().Str("hook", string(hook)).Int("redactions", n).Msg("redacted")
	reply, err := pluginserver.Modify(p.cfg.Name, obj)
	if err != nil {
		return nil, err
	}
	reply.Result.Metadata = map[string]any{"redactions": n}
	if pctx != nil {
		// Tell later hooks of the same request what happened here.
		key := p.cfg.Name + ".redactions"
		prev, _ := pctx.State[key].(float64)
		pctx.State[key] = prev + float64(n)
		reply.Context = pctx
	}
	return reply, nil
}

// check runs the deny rules over obj[subject] and the strings of obj[field].
func (p *Plugin) check(obj map[string]any, subject, field string) *cpex.PluginViolation {
	if len(p.deny) == 0 {
		return nil
	}
	type candidate struct{ path, text string }
	var cands []candidate
	if s, ok := obj[subject].(string); ok {
		cands = append(cands, candidate{subject, s})
	}
	if field != "" {
		walkStrings(obj[field], field, func(path, s string) {
			cands = append(cands, candidate{path, s})
		})
	}
	for _, re := range p.deny {
		for _, c := range cands {
			if re.MatchString(c.text) {
				return &cpex.PluginViolation{
					Reason:      "Denied by policy",
					Description: fmt.Sprintf("%s matches deny pattern %q", c.path, re.String()),
					Code:        p.cfg.ViolationCode,
					Details:     map[string]any{"pattern": re.String(), "field": c.path},
				}
			}
		}
	}
	return nil
}

// structural names result fields whose strings are never redacted.
func structural(key string) bool {
	switch key {
	case "type", "mimeType", "uri", "blob", "_meta":
		return true
	}
	return false
}

// redactValue returns v with the redactions applied to its strings, and the
// number of replacements. In results (post) structural fields are skipped.
func (p *Plugin) redactValue(v any, post bool) (any, int) {
	switch x := v.(type) {
	case string:
		n := 0
		for _, r := range p.redact {
			if m := r.re.FindAllStringIndex(x, -1); len(m) > 0 {
				n += len(m)
				x = r.re.ReplaceAllString(x, r.repl)
			}
		}
		return x, n
	case map[string]any:
		total := 0
		for k, e := range x {
			if post && structural(k) {
				continue
			}
			ne, n := p.redactValue(e, post)
			if n > 0 {
				x[k] = ne
				total += n
			}
		}
		return x, total
	case []any:
		total := 0
		for i, e := range x {
			ne, n := p.redactValue(e, post)
			if n > 0 {
				x[i] = ne
				total += n
			}
		}
		return x, total
	}
	return v, 0
}

// walkStrings calls fn for every string in v, in a stable order, with a
// path such as args.cmd[0].
func walkStrings(v any, path string, fn func(path, s string)) {
	switch x := v.(type) {
	case string:
		fn(path, x)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walkStrings(x[k], path+"."+k, fn)
		}
	case []any:
		for i, e := range x {
			walkStrings(e, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	}
}

// decodeObject decodes a JSON object, keeping numbers exact.
func decodeObject(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if obj == nil {
		obj = map[string]any{}
	}
	return obj, nil
}
